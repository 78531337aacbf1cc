package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/config"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/configuration.md")

const configDoc = "../../docs/configuration.md"

// docTables are the generated sections of docs/configuration.md, by marker name.
func docTables() []struct {
	name string
	text func() string
} {
	table := func(t config.Table) func() string { return t.Markdown }
	coordinator, _ := coordinatorFlags(new(config.Coordinator))
	provider := providerFlags(new(config.Provider))
	up, _ := upFlags(new(config.Up))
	bench := flag.NewFlagSet("bench", flag.ContinueOnError)
	new(config.Bench).Flags(bench)
	simulate := simulateFlagSet(new(simulateFlags))
	db := flag.NewFlagSet("keys, admin", flag.ContinueOnError)
	new(dbFlags).register(db)
	return []struct {
		name string
		text func() string
	}{
		{"coordinator", table(config.Table{Flags: coordinator, FileKey: config.FileKey})},
		{"up", table(config.Table{Flags: up, FileKey: config.FileKey})},
		{"provider", table(config.Table{Flags: provider, FileKey: config.ProviderFileKey,
			Defaults: map[string]string{"name": "the machine's host name"}})},
		{"bench", table(config.Table{Flags: bench, EnvVar: benchEnvVar})},
		{"simulate", table(config.Table{Flags: simulate, EnvVar: func(string) string { return "" }})},
		{"database", table(config.Table{Flags: db})},
		{"provider-file", config.ProviderFileTable},
		{"env", func() string { return config.EnvTable(coordinator, up, provider, bench, db) }},
	}
}

func benchEnvVar(flagName string) string {
	for _, e := range config.BenchEnv {
		if e.Flag == flagName {
			return e.Name
		}
	}
	return config.EnvVar(flagName)
}

// docCommands names, for each command, the section of docs/configuration.md that lists its
// settings; "" for a command with none worth listing there.
var docCommands = map[string]string{
	"up": "up", "coordinator": "coordinator", "provider": "provider", "bench": "bench",
	"keys": "database", "admin": "database", "receipt": "", "version": "", "simulate": "simulate",
}

// docs/configuration.md lists every setting of every program, with its environment variable,
// file key and default, in tables generated from the flags: a flag added, renamed or given
// another default fails this test until the tables are refreshed with -update.
func TestDocs(t *testing.T) {
	for _, c := range commands {
		if _, ok := docCommands[c.name]; !ok {
			t.Errorf("command %q is not in docCommands (docs_test.go): add a table of its settings to docs/configuration.md and to docTables, or map it to \"\"", c.name)
		}
	}
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var stale []string
	for _, s := range docTables() {
		begin := fmt.Sprintf("<!-- BEGIN GENERATED %s: go test ./cmd/shareai -run TestDocs -update -->\n", s.name)
		end := fmt.Sprintf("<!-- END GENERATED %s -->", s.name)
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Errorf("docs/configuration.md lacks the section %q: add the lines\n%s%s", s.name, begin, end)
			continue
		}
		got, want := doc[i+len(begin):j], s.text()
		if got == want {
			continue
		}
		stale = append(stale, s.name+" ("+firstDiff(got, want)+")")
		doc = doc[:i+len(begin)] + want + doc[j:]
	}
	if len(stale) == 0 {
		return
	}
	if *update {
		if err := os.WriteFile(configDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("refreshed docs/configuration.md: %s", strings.Join(stale, "; "))
		return
	}
	t.Errorf("docs/configuration.md does not match the flags in %s.\nRun: go test ./cmd/shareai -run TestDocs -update\n(then read the diff: the prose around the tables may need a word too)", strings.Join(stale, "; "))
}

// firstDiff shows the first line where the documented table and the code's differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("documented %q, the code says %q", gl, wl)
		}
	}
	return ""
}
