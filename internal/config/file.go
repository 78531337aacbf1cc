package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// decodeYAML reads the YAML file at path into v, refusing settings v does not have, so that a
// misspelt key is an error rather than a setting silently ignored.
func decodeYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the configuration: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %s", path, yamlError(err))
	}
	return nil
}

var (
	unknownField = regexp.MustCompile(`field (\S+) not found in type \S+( \{.*\})?`)
	goType       = regexp.MustCompile(` into \S+$`)
)

// yamlError rewrites the YAML decoder's messages, which name Go types, in a provider's terms:
// `line 7: unknown setting "enigne"`, `line 9: cannot unmarshal !!str `fast` into a number`.
func yamlError(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		m = unknownField.ReplaceAllString(m, `unknown setting "$1"`)
		msgs[i] = goType.ReplaceAllStringFunc(m, func(into string) string {
			switch {
			case strings.Contains(into, "Duration"):
				return " into a duration such as 5m or 30s"
			case strings.Contains(into, "float"), strings.Contains(into, "int"):
				return " into a number"
			case strings.Contains(into, "bool"):
				return " into true or false"
			case strings.Contains(into, "[]"):
				return " into a list"
			}
			return " into this setting"
		})
	}
	return strings.Join(msgs, "; ")
}
