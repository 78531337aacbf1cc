package config

import (
	"flag"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Table documents a program's settings: rendered from its flag set, so that
// docs/configuration.md cannot drift from the code.
type Table struct {
	Flags *flag.FlagSet
	// FileKey returns the key that sets a flag in the program's file, or "" for none; nil: the
	// program reads no file.
	FileKey func(flagName string) string
	// EnvVar returns the environment variable that sets a flag, or ""; nil: EnvVar.
	EnvVar func(flagName string) string
	// Defaults describes in words the defaults that differ from one machine to another.
	Defaults map[string]string
}

// Markdown renders the table: each flag with the environment variable that sets it, its key in
// the program's file, its default and its meaning.
func (t Table) Markdown() string {
	fileKey, envVar := t.FileKey, t.EnvVar
	if fileKey == nil {
		fileKey = func(string) string { return "" }
	}
	if envVar == nil {
		envVar = EnvVar
	}
	var b strings.Builder
	b.WriteString("| flag | environment | file key | default | meaning |\n|---|---|---|---|---|\n")
	t.Flags.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		if IsSecret(f.Name) {
			usage += ". **Secret**: shown masked"
		}
		def := "*(empty)*"
		if d, ok := t.Defaults[f.Name]; ok {
			def = d
		} else if f.DefValue != "" {
			def = code(f.DefValue)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", dashed(f.Name), orDash(envVar(f.Name)), orDash(fileKey(f.Name)), def, cell(usage))
	})
	return b.String()
}

// EnvTable renders Env as a Markdown table, with the programs, among sets, whose flags each
// variable sets.
func EnvTable(sets ...*flag.FlagSet) string {
	var b strings.Builder
	b.WriteString("| variable | flag | programs | meaning |\n|---|---|---|---|\n")
	for _, e := range Env {
		doc := e.Doc
		if IsSecret(e.Flag) {
			doc += ". **Secret**"
		}
		var progs []string
		for _, fs := range sets {
			if fs.Lookup(e.Flag) != nil {
				progs = append(progs, fs.Name())
			}
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` | %s | %s |\n", e.Name, e.Flag, strings.Join(progs, ", "), cell(doc))
	}
	return b.String()
}

// dashed writes a flag as its command's help does: -c, --addr.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return code(s)
}

// code quotes s as Markdown code, with a longer fence when s holds backquotes.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// cell makes s fit in a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// ProviderFileTable renders every key of the provider's YAML file as a Markdown table: its
// flag, if it has one, and the kind of value it takes.
func ProviderFileTable() string {
	var p Provider
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	p.Flags(fs)
	flagOf := map[string]string{}
	for _, s := range (&providerFile{}).flagValues() {
		flagOf[yamlKey(s.name)] = s.name
	}
	var b strings.Builder
	b.WriteString("| file key | flag | value |\n|---|---|---|\n")
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			key := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Duration]():
				walk(ft, key+".")
				continue
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				fmt.Fprintf(&b, "| `%s` | — | a list of mappings with the keys below |\n", key)
				walk(ft.Elem(), key+"[].")
				continue
			}
			kind := kindOf(ft)
			switch {
			case strings.HasSuffix(key, ".timezone") && strings.Contains(key, "price."):
				kind = "IANA time zone of the price's windows (`Europe/Berlin`); default: `availability.timezone`'s"
			case strings.HasSuffix(key, ".name") && strings.Contains(key, "price."):
				kind = "the window's name, what reports call its ask (`peak`): letters, digits, `-`, `_`"
			case strings.HasSuffix(key, ".when") && strings.Contains(key, "price."):
				kind = "weekly windows as `availability.windows` (`mon-fri 09:00-18:00`)"
			case strings.Contains(key, "price."):
				kind = "USD per 1M tokens (`0.05`)"
			}
			fl := "—"
			if name, ok := flagOf[key]; ok {
				fl = "`--" + name + "`"
				if ft.Kind() != reflect.Slice {
					if g, ok := fs.Lookup(name).Value.(flag.Getter); ok && kind == "text" {
						kind = kindOf(reflect.TypeOf(g.Get()))
					}
				}
			}
			if name := flagOf[key]; IsSecret(name) {
				kind += ". **Secret**"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", key, fl, kind)
		}
	}
	walk(reflect.TypeFor[providerFile](), "")
	return b.String()
}

// kindOf names the kind of value a setting of type t takes.
func kindOf(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration (`30s`, `5m`, `2h`)"
	case t.Kind() == reflect.Bool:
		return "`true` or `false`"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		return "whole number"
	case t.Kind() == reflect.Slice:
		return "list of text (`[a, b]`)"
	}
	return "text"
}
