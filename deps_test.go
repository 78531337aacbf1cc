package shareai_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/shareai/shareai/"

// imports adds to seen the module's packages that pkg imports (non-test files), and theirs
// too unless direct.
func imports(t *testing.T, pkg string, seen map[string]bool, direct bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(strings.TrimPrefix(pkg, module), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, module) && !seen[p] {
				seen[p] = true
				if !direct {
					imports(t, p, seen, false)
				}
			}
		}
	}
}

// TestDependencies holds the architecture's import rules: the agent side never reaches the
// coordinator's state, and the wire packages stay standard-library only.
func TestDependencies(t *testing.T) {
	tests := []struct {
		pkg       string
		direct    bool // only the package's own imports; else all it pulls in
		forbidden []string
	}{
		{"internal/agent", false, []string{"internal/store", "internal/gateway", "internal/fleet", "internal/relay", "internal/matcher", "internal/coordinator", "internal/ledger"}},
		{"internal/engine/sim", false, []string{"internal/store", "internal/agent", "internal/gateway", "internal/fleet"}},
		{"internal/engine/openaicompat", false, []string{"internal/store", "internal/agent", "internal/gateway", "internal/fleet"}},
		{"internal/matcher", true, []string{"internal/store", "internal/gateway", "internal/relay"}},
		{"internal/relay", false, []string{"internal/store", "internal/gateway", "internal/fleet"}}, // a job is relay.Frames
		{"internal/protocol", false, []string{"internal/"}},
		{"internal/tracing", false, []string{"internal/"}},
		{"internal/metrics", false, []string{"internal/store", "internal/gateway", "internal/fleet", "internal/agent"}},
		{"internal/api", false, []string{"internal/store", "internal/fleet", "internal/gateway"}},
		{"internal/meter", false, []string{"internal/"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			if _, err := os.Stat(tt.pkg); err != nil {
				t.Skipf("no package %s", tt.pkg)
			}
			seen := map[string]bool{}
			imports(t, module+tt.pkg, seen, tt.direct)
			for dep := range seen {
				for _, f := range tt.forbidden {
					if strings.HasPrefix(dep, module+f) {
						t.Errorf("%s imports %s", tt.pkg, strings.TrimPrefix(dep, module))
					}
				}
			}
		})
	}
}
