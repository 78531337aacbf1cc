package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// The coordinator's and `up`'s configuration files are flat YAML mappings whose keys are the
// flag names (addr: 0.0.0.0:8080, drain-timeout: 30s), so that every flag is a file setting
// and no second list of settings has to be kept in step with the flags.

// commandOnly names the flags that act on one run rather than configure the program: a file
// cannot set them.
var commandOnly = map[string]bool{"config": true, "check-config": true}

// configFlag registers --config for a program configured by a flat file.
func configFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "config", "", "YAML configuration file whose keys are these flags' names (addr: 0.0.0.0:8080); the environment and flags override it")
}

// FileKey returns the key that sets the flag in a flat configuration file, or "" for a flag that
// no file sets.
func FileKey(flagName string) string {
	if commandOnly[flagName] {
		return ""
	}
	return flagName
}

// LoadFlagFile reads the flat YAML file at path (nothing when path is empty) into fs: each key
// names a flag, whose own Set checks the value, and the value becomes the flag's default, so
// the environment and the command line still override it and --help shows it. Errors name the
// file, the line and the setting, and never show a secret.
func LoadFlagFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty, or only comments
		}
		return fmt.Errorf("%s: %s", path, yamlError(err))
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: line %d: one YAML document of settings, not several", path, next.Line)
	}
	m := &doc
	if m.Kind == yaml.DocumentNode && len(m.Content) == 1 {
		m = m.Content[0]
	}
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		return nil
	}
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: line %d: want a mapping of settings, such as addr: 127.0.0.1:8080", path, m.Line)
	}
	var errs []error
	fail := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: line %d: %s", path, line, fmt.Sprintf(format, args...)))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		name := k.Value
		f := fs.Lookup(name)
		if k.Kind != yaml.ScalarNode || f == nil || FileKey(name) == "" {
			msg := fmt.Sprintf("unknown setting %q", name)
			if alt := strings.ReplaceAll(name, "_", "-"); alt != name && fs.Lookup(alt) != nil && FileKey(alt) != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", alt)
			}
			fail(k.Line, "%s", msg)
			continue
		}
		if first, ok := seen[name]; ok {
			fail(k.Line, "%s is set twice (first on line %d)", name, first)
			continue
		}
		seen[name] = k.Line
		if v.Kind != yaml.ScalarNode {
			fail(v.Line, "%s: want a single value, not a list or a mapping", name)
			continue
		}
		value := v.Value
		if v.Tag == "!!null" {
			value = ""
		}
		if err := f.Value.Set(value); err != nil {
			fail(v.Line, "%s: %q: %s", name, maskSecret(name, value), valueHint(f, err))
			continue
		}
		showDefault(f, value)
	}
	return errors.Join(errs...)
}

// valueHint says what a flag wants, for a value its Set refused: the flag package's own errors
// ("parse error") do not say.
func valueHint(f *flag.Flag, err error) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return "want a duration such as 30s, 5m or 72h"
		case bool:
			return "want true or false"
		case int, int64, uint, uint64:
			return "want a whole number"
		case float64:
			return "want a number"
		}
	}
	return err.Error()
}

// isHTTPURL reports whether s is an absolute http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}

// isHTTPURLs reports whether s is one http(s) URL or several, comma-separated.
func isHTTPURLs(s string) bool {
	n := 0
	for u := range strings.SplitSeq(s, ",") {
		if !isHTTPURL(strings.TrimSpace(u)) {
			return false
		}
		n++
	}
	return n > 0
}

// IsSecret reports whether a flag holds a credential, which messages, --help and
// --check-config show masked.
func IsSecret(flagName string) bool { return secretFlags[flagName] || urlFlags[flagName] }

// MaskURL shows a URL without its password, for messages and logs:
// postgres://user@host:5432/db.
func MaskURL(v string) string {
	u, err := url.Parse(v)
	if err != nil {
		return "…" // cannot tell where the password is
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	if q := u.Query(); q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// EnvVar returns the environment variable that sets the flag, or "".
func EnvVar(flagName string) string {
	for _, e := range Env {
		if e.Flag == flagName {
			return e.Name
		}
	}
	return ""
}

// WriteSettings writes fs's flags with their values, as a flat configuration file would hold
// them, secrets masked: what --check-config prints. Flags no file sets are left out.
func WriteSettings(w io.Writer, fs *flag.FlagSet) error {
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if FileKey(f.Name) != "" {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	// One mapping, its values plain where they read back as they are: this file reads values
	// as text, whatever YAML type they would resolve to.
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range names {
		v := &yaml.Node{Kind: yaml.ScalarNode, Value: maskSecret(name, fs.Lookup(name).Value.String())}
		if v.Value == "" {
			v.Tag = "!!str" // "", not null
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: FileKey(name)}, v)
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
