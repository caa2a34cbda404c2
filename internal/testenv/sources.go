package testenv

import "strings"

// SettingSource is one way to give a program a setting's value, and the
// origin its error messages must then name.
type SettingSource struct {
	Args []string
	Env  map[string]string
	From string // "(from --name)", "(from env TICKCAST_NAME)", "(from config FILE:LINE)"
}

// SettingSources returns the five ways to give setting name the value: the
// flag with a separate and with an attached value, the environment
// variable, and the YAML file at path, whose line holds the setting, named
// by --config and by TICKCAST_CONFIG. The caller writes the file.
func SettingSources(name, value, path, line string) []SettingSource {
	envName := "TICKCAST_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	file := "(from config " + path + ":" + line + ")"
	return []SettingSource{
		{[]string{"--" + name, value}, nil, "(from --" + name + ")"},
		{[]string{"--" + name + "=" + value}, nil, "(from --" + name + ")"},
		{nil, map[string]string{envName: value}, "(from env " + envName + ")"},
		{[]string{"--config", path}, nil, file},
		{nil, map[string]string{"TICKCAST_CONFIG": path}, file},
	}
}
