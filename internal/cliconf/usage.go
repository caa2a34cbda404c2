package cliconf

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Usage returns the --help text of program name, whose settings struct dst
// points to: the precedence rule, then every flag with its type, help text,
// environment variable and default. It is built from the same tags as Load,
// so it cannot drift from what Load does.
func Usage(name string, dst any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s [flags]\n\n", name)
	t := reflect.TypeOf(dst)
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		fmt.Fprintf(&b, "cliconf: Usage needs a pointer to a settings struct, got %T\n", dst)
		return b.String()
	}
	settings, _, err := settingsOf(t)
	if err != nil {
		fmt.Fprintf(&b, "%v\n", err)
		return b.String()
	}
	wrap(&b, "", "Every setting can be given as a flag, as an environment variable or as a key in a YAML config file named by --"+ConfigFlag+". "+precedence)
	b.WriteString("\nFlags:\n")
	for _, s := range settings {
		flagUsage(&b, "--"+s.name, s.kind, s.help, s.env, defaultText(s))
	}
	flagUsage(&b, "--"+ConfigFlag+" file", kindString,
		"YAML config file of settings keyed by flag name, one \"name: value\" per line; --config \"\" reads none",
		configEnv, "none")
	return b.String()
}

func flagUsage(b *strings.Builder, flag string, k kind, help, env, def string) {
	b.WriteString("  ")
	b.WriteString(flag)
	if k != kindBool && !strings.Contains(flag, " ") {
		b.WriteByte(' ')
		b.WriteString(typeName[k])
	}
	b.WriteByte('\n')
	if help != "" {
		wrap(b, "        ", help)
	}
	fmt.Fprintf(b, "        env %s, default %s\n", env, def)
}

// defaultText shows a setting's default as a user would write it.
func defaultText(s setting) string {
	switch {
	case s.kind == kindString:
		return strconv.Quote(s.def)
	case s.kind == kindList && s.def == "":
		return "empty"
	case s.def != "":
		return s.def
	case s.kind == kindBool:
		return "false"
	case s.kind == kindDuration:
		return "0s"
	}
	return "0"
}

// wrap writes text in lines of at most 80 columns, each starting with
// indent.
func wrap(b *strings.Builder, indent, text string) {
	n := 0
	for i, w := range strings.Fields(text) {
		if i > 0 && n+1+len(w) > 80 {
			b.WriteByte('\n')
			n = 0
		}
		if n == 0 {
			b.WriteString(indent)
			n = len(indent)
		} else {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	b.WriteByte('\n')
}
