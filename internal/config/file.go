package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// FileError is an invalid setting of a configuration file, named as the file writes it
// (price.input, offers[0].model, engine.kind) with its line.
type FileError struct {
	File string // the file's path
	Line int    // 0: not known
	Key  string // "": the error is about the file, not one setting
	// Also says where else the setting is set, for one the file leaves out: "--token,
	// SHAREAI_PROVIDER_TOKEN".
	Also string
	Msg  string
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	if e.Also != "" {
		b.WriteString(" (" + e.Also + ")")
	}
	return b.String() + ": " + e.Msg
}

// decodeFile reads the YAML file at path into v, a struct whose fields carry yaml tags, and
// returns the line of each setting, by its key as the file writes it (price.input,
// offers[0].model), or nil when it cannot read the file. A misspelt key, or a value of the
// wrong kind, is a *FileError naming the setting and its line, and leaves the setting empty;
// every one is reported at once.
func decodeFile(path string, v any) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return map[string]int{}, nil // empty, or only comments
		}
		return nil, fmt.Errorf("%s: %s", path, yamlError(err))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, &FileError{File: path, Line: next.Line, Msg: "one YAML document of settings, not several"}
	}
	d := fileDecoder{path: path, lines: map[string]int{}}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	d.decode(root, reflect.ValueOf(v).Elem(), "")
	return d.lines, errors.Join(d.errs...)
}

type fileDecoder struct {
	path  string
	lines map[string]int
	errs  []error
}

func (d *fileDecoder) fail(line int, key, format string, args ...any) {
	d.errs = append(d.errs, &FileError{File: d.path, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// decode sets v from n, the value of the setting key ("" for the whole file).
func (d *fileDecoder) decode(n *yaml.Node, v reflect.Value, key string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // left empty: the default
	}
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer:
		e := reflect.New(t.Elem())
		d.decode(n, e.Elem(), key)
		v.Set(e)
	case t.Kind() == reflect.Struct:
		switch {
		case n.Kind == yaml.MappingNode:
		case key == "":
			d.fail(n.Line, "", "want a mapping of settings, such as %s, not %s", example(key, t, n), nodeKind(n))
			return
		default:
			d.fail(n.Line, key, "want settings under it, such as %s, not %s", example(key, t, n), nodeKind(n))
			return
		}
		d.decodeMapping(n, v, key)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n.Line, key, "want a list, such as [a, b], not %s", nodeKind(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			sub := fmt.Sprintf("%s[%d]", key, i)
			d.lines[sub] = item.Line
			d.decode(item, s.Index(i), sub)
		}
		v.Set(s)
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(n.Line, key, "want a single value, not %s", nodeKind(n))
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.fail(n.Line, key, "%q: %s", n.Value, wants(t))
		}
	}
}

func (d *fileDecoder) decodeMapping(n *yaml.Node, v reflect.Value, key string) {
	t := v.Type()
	fields := map[string]int{}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			fields[name] = i
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		sub := joinKey(key, k.Value)
		idx, ok := fields[k.Value]
		if k.Kind != yaml.ScalarNode || !ok {
			msg := fmt.Sprintf("unknown setting %q", sub)
			if alt := strings.ReplaceAll(k.Value, "-", "_"); alt != k.Value {
				if _, ok := fields[alt]; ok {
					msg += fmt.Sprintf(" (did you mean %q?)", joinKey(key, alt))
				}
			}
			d.fail(k.Line, "", "%s", msg)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k.Line, sub, "set twice (first on line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		d.lines[sub] = k.Line
		d.decode(val, v.Field(idx), sub)
	}
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// example shows how the settings of t, given n, are written: engine: {kind: sim} for
// engine: sim.
func example(key string, t reflect.Type, n *yaml.Node) string {
	first, _, _ := strings.Cut(t.Field(0).Tag.Get("yaml"), ",")
	value := "…"
	if n.Kind == yaml.ScalarNode {
		value = n.Value
	}
	switch {
	case key == "":
		return first + ": " + value
	case strings.HasSuffix(key, "]"): // a list's item
		return fmt.Sprintf("{%s: %s}", first, value)
	}
	return fmt.Sprintf("%s: {%s: %s}", key[strings.LastIndex(key, ".")+1:], first, value)
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("the value %q", n.Value)
}

// wants says what a setting of type t takes, for a value it cannot hold.
func wants(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "want a duration such as 30s, 5m or 72h"
	case t.Kind() == reflect.Bool:
		return "want true or false"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "want a whole number"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "want a number"
	}
	return "want a single value"
}

// yamlError is the YAML parser's message for a file it cannot read, such as
// `yaml: line 3: did not find expected key`.
func yamlError(err error) string { return err.Error() }

// fileSettings is what a provider's file set, so that an invalid value from the file is named
// as the file writes it, with its line, rather than by its flag.
type fileSettings struct {
	path  string
	lines map[string]int    // each setting's line, by its key as written: price.input, offers[0].model
	flags map[string]string // the value the file gave each flag, as the flag holds it
	// defaults are the flags' own defaults, before the file, the environment or the command
	// line set them.
	defaults map[string]string
	fs       *flag.FlagSet
}

func (f *fileSettings) errorf(key, format string, args ...any) error {
	line, _ := f.line(key)
	return &FileError{File: f.path, Line: line, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// line is the line of the setting key, or else of the nearest setting holding it (offers[0]
// for an offer's missing offers[0].model).
func (f *fileSettings) line(key string) (int, bool) {
	for key != "" {
		if l, ok := f.lines[key]; ok {
			return l, true
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0, false
}

// name rewrites the *FieldError in err of settings whose value is the file's as *FileError:
// provider.yaml: line 12: price.input: …. A setting left out everywhere is named as the file
// would write it, with its flag and variable; one the environment or a flag set keeps its
// flag's name.
func (f *fileSettings) name(err error) error {
	if f == nil || err == nil {
		return err
	}
	var out []error
	for _, e := range leaves(err) {
		if fe, ok := errors.AsType[*FieldError](e); ok {
			if named := f.fieldError(fe); named != nil {
				e = named
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func (f *fileSettings) fieldError(fe *FieldError) error {
	key, flagName := fe.Field, ""
	if !strings.ContainsAny(fe.Field, ".[") {
		flagName, key = fe.Field, ProviderFileKey(fe.Field)
	} else {
		flagName = providerFlagOf(key)
	}
	if key == "" {
		return nil
	}
	if flagName != "" {
		fl := f.fs.Lookup(flagName)
		v, fromFile := f.flags[flagName]
		switch {
		case fl == nil:
			return nil
		case fromFile && fl.Value.String() == v: // the file's value
		case !fromFile && fl.Value.String() == f.defaults[flagName]: // set nowhere
			also := "--" + flagName
			if env := EnvVar(flagName); env != "" {
				also += ", " + env
			}
			return &FileError{File: f.path, Key: key, Also: also, Msg: fe.Msg}
		default:
			return nil // the environment's or a flag's value
		}
	}
	line, ok := f.line(key)
	if !ok {
		return nil
	}
	return &FileError{File: f.path, Line: line, Key: key, Msg: fe.Msg}
}

// leaves flattens errors.Join's tree.
func leaves(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}
