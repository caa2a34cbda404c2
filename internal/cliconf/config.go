package cliconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// parseConfig parses a config file: one YAML mapping whose keys are setting
// names. It walks yaml.Node rather than decoding into a struct so that every
// value goes through setting.parse like a flag's, and every error carries
// the line it is about.
func parseConfig(path string, data []byte, settings []setting) ([]value, error) {
	origin := "config " + path
	at := func(n *yaml.Node) string {
		if n.Line > 0 {
			return origin + ":" + strconv.Itoa(n.Line)
		}
		return origin
	}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF { // empty, or only comments
			return nil, nil
		}
		return nil, yamlError(origin, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); err != io.EOF {
		if err != nil {
			return nil, yamlError(origin, err)
		}
		return nil, &Error{Origin: at(&next), Err: errors.New("more than one YAML document")}
	}

	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	root = resolve(root)
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{Origin: at(root), Err: errors.New("not a mapping of setting names to values")}
	}

	byName := make(map[string]*setting, len(settings))
	for i := range settings {
		byName[settings[i].name] = &settings[i]
	}
	firstLine := map[string]int{}
	var got []value
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, node := root.Content[i], resolve(root.Content[i+1])
		if key.Kind != yaml.ScalarNode {
			return nil, &Error{Origin: at(key), Err: errors.New("a key must be a setting name")}
		}
		s := byName[key.Value]
		if s == nil {
			return nil, &Error{Field: key.Value, Origin: at(key), Err: ErrUnknownSetting}
		}
		text, items, err := nodeText(node, s.kind == kindList)
		if err == nil {
			if line, dup := firstLine[s.name]; dup {
				err = fmt.Errorf("already set on line %d", line)
			}
		}
		firstLine[s.name] = key.Line
		var v reflect.Value
		if err == nil {
			if items != nil {
				v = s.list(items)
			} else {
				v, err = s.parse(text)
			}
		}
		if err != nil {
			return nil, &Error{Field: s.name, Origin: at(key), Value: text, Err: err}
		}
		got = append(got, value{s: s, v: v, origin: at(key)})
	}
	return got, nil
}

// nodeText returns a scalar's text, or a sequence's items (non-nil, for a
// list setting only). A null scalar (key with no value, ~ or null) is the
// empty text.
func nodeText(n *yaml.Node, list bool) (string, []string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "", nil, nil
		}
		return n.Value, nil, nil
	case yaml.SequenceNode:
		if !list {
			return "", nil, errors.New("want one value, not a list")
		}
		items := make([]string, 0, len(n.Content))
		for _, it := range n.Content {
			text, _, err := nodeText(resolve(it), false)
			if err != nil {
				return "", nil, errors.New("a list item must be a single value")
			}
			items = append(items, text)
		}
		return "", items, nil
	case yaml.MappingNode:
		return "", nil, errors.New("want a value, not a mapping")
	}
	return "", nil, errors.New("not a value")
}

// resolve follows an alias (*name) to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError moves the line number out of a YAML syntax error into the
// origin, so it reads like every other config file error.
func yamlError(origin string, err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return &Error{Origin: origin + ":" + m[1], Err: errors.New(msg[len(m[0]):])}
	}
	if rest, ok := strings.CutPrefix(msg, "yaml: "); ok {
		msg = rest
	}
	return &Error{Origin: origin, Err: errors.New(msg)}
}
