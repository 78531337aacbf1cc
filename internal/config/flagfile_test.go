package config

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, name, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// load fills fs as the commands do: the file, then the environment, then the flags.
func load(t *testing.T, fs *flag.FlagSet, yaml string, env map[string]string, args ...string) error {
	t.Helper()
	if err := LoadFlagFile(fs, writeConfig(t, "coordinator.yaml", yaml)); err != nil {
		return err
	}
	if err := Bind(fs, func(k string) string { return env[k] }); err != nil {
		return err
	}
	return fs.Parse(args)
}

// The environment overrides the file, flags override both, and the file overrides the
// defaults: for the coordinator and for `up`.
func TestLoadFlagFile_Precedence(t *testing.T) {
	const yaml = `# the file's settings
addr: 0.0.0.0:9000
data-dir: /var/lib/shareai
log-level: warn
platform-fee: 7.5
log-format: json
`
	env := map[string]string{"SHAREAI_DATA_DIR": "/env/dir", "SHAREAI_LOG_LEVEL": "debug"}
	args := []string{"--log-level", "error"}

	t.Run("coordinator", func(t *testing.T) {
		var c Coordinator
		fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
		c.Flags(fs)
		if err := load(t, fs, yaml+"drain-timeout: 1m\ntrust-new-nodes: true\n", env, args...); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate() = %v", err)
		}
		got := []any{c.Addr, c.DataDir, c.Log.Level, c.Pricing.FeePercent, c.Log.Format, c.Coordinator.DrainTimeout, c.Coordinator.Fleet.TrustNewNodes, c.Coordinator.Fleet.HeartbeatInterval}
		want := []any{"0.0.0.0:9000", "/env/dir", "error", "7.5", "json", time.Minute, true, 5 * time.Second}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("setting %d = %v, want %v (file < environment < flags, defaults kept)", i, got[i], want[i])
			}
		}
	})
	t.Run("up", func(t *testing.T) {
		var u Up
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		u.Flags(fs)
		if err := load(t, fs, yaml+"providers: 5\nsim-tps: 0\n", env, append(args, "--providers", "3")...); err != nil {
			t.Fatal(err)
		}
		if err := u.Validate(); err != nil {
			t.Fatalf("Validate() = %v", err)
		}
		got := []any{u.Net.Addr, u.Net.DataDir, u.Log.Level, u.Pricing.FeePercent, u.Net.Providers, u.SimTPS, u.Engine}
		want := []any{"0.0.0.0:9000", "/env/dir", "error", "7.5", 3, 0.0, "sim"}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("setting %d = %v, want %v (file < environment < flags, defaults kept)", i, got[i], want[i])
			}
		}
		var help strings.Builder
		fs.SetOutput(&help)
		fs.PrintDefaults()
		if !strings.Contains(help.String(), `(default "0.0.0.0:9000")`) {
			t.Errorf("--help does not show the file's addr as the default:\n%s", help.String())
		}
	})
}

func TestLoadFlagFile_Errors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "addr: 127.0.0.1:1\nadr: 0.0.0.0:8080\n", []string{`coordinator.yaml: line 2: unknown setting "adr"`}},
		{"underscore", "data_dir: /x\n", []string{`line 1: unknown setting "data_dir" (did you mean "data-dir"?)`}},
		{"a file names no file", "config: other.yaml\n", []string{`line 1: unknown setting "config"`}},
		{"bad duration", "addr: 127.0.0.1:1\n\ndrain-timeout: soon\n", []string{`line 3: drain-timeout: "soon": want a duration such as 30s, 5m or 72h`}},
		{"bad number", "max-body-bytes: 1e3x\n", []string{`line 1: max-body-bytes: "1e3x": want a whole number`}},
		{"bad bool", "trust-new-nodes: maybe\n", []string{`line 1: trust-new-nodes: "maybe": want true or false`}},
		{"every error at once", "adr: x\nprobe-every: often\n", []string{`line 1: unknown setting "adr"`, `line 2: probe-every: "often"`}},
		{"list", "addr: [a, b]\n", []string{`line 1: addr: want a single value, not a list or a mapping`}},
		{"twice", "addr: a:1\nlog-level: info\naddr: b:2\n", []string{`line 3: addr is set twice (first on line 1)`}},
		{"not a mapping", "- addr: a\n", []string{`line 1: want a mapping of settings`}},
		{"two documents", "addr: a:1\n---\naddr: b:2\n", []string{`line 2: one YAML document of settings, not several`}},
		{"not YAML", "addr: [\n", []string{`coordinator.yaml: yaml: line 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Coordinator
			fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
			c.Flags(fs)
			err := LoadFlagFile(fs, writeConfig(t, "coordinator.yaml", tt.yaml))
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("LoadFlagFile() = %v, want an error containing %q", err, want)
				}
			}
		})
	}
}

func TestLoadFlagFile_EmptyOrMissing(t *testing.T) {
	for _, yaml := range []string{"", "# nothing set yet\n", "---\n"} {
		var c Coordinator
		fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
		c.Flags(fs)
		if err := LoadFlagFile(fs, writeConfig(t, "c.yaml", yaml)); err != nil || c.Addr != "127.0.0.1:8080" {
			t.Errorf("file %q: %v, addr %q; want no error and the defaults", yaml, err, c.Addr)
		}
	}
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	new(Coordinator).Flags(fs)
	if err := LoadFlagFile(fs, filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("LoadFlagFile(missing file) = nil, want an error")
	}
}

// A database URL's password shows nowhere: not in --help, whichever source set it, nor in what
// --check-config prints.
func TestSecrets_DatabasePassword(t *testing.T) {
	for _, source := range []string{"file", "environment"} {
		t.Run(source, func(t *testing.T) {
			var c Coordinator
			fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
			c.Flags(fs)
			url := "postgres://shareai:HUNTER2@db.example:5432/shareai?sslmode=require"
			yaml, env := "db: "+url+"\n", map[string]string{}
			if source == "environment" {
				yaml, env = "", map[string]string{"SHAREAI_DB": url}
			}
			if err := load(t, fs, yaml, env); err != nil {
				t.Fatal(err)
			}
			if c.DB != url {
				t.Errorf("db = %q, want the URL with its password", c.DB)
			}
			var out strings.Builder
			fs.SetOutput(&out)
			fs.PrintDefaults()
			if err := WriteSettings(&out, fs); err != nil {
				t.Fatal(err)
			}
			if s := out.String(); strings.Contains(s, "HUNTER2") || !strings.Contains(s, "postgres://shareai@db.example:5432/shareai?sslmode=require") {
				t.Errorf("the password shows, or not the rest of the URL:\n%s", s)
			}
		})
	}
}

func TestMaskSecret(t *testing.T) {
	tests := []struct{ flag, value, want string }{
		{"db", "postgres://u:pw@h:5432/d", "postgres://u@h:5432/d"},
		{"db", "postgresql://u@h/d", "postgresql://u@h/d"},
		{"db", "postgres://h/d?sslmode=disable&password=pw", "postgres://h/d?sslmode=disable"},
		{"db", "postgres://u:p w%zz@h/d", "…"},
		{"nats", "nats://u:pw@n1:4222,tls://n2:4222", "nats://u@n1:4222,tls://n2:4222"},
		{"token", "spt-0123456789", "spt-01…"},
		{"key", "sk-0123456789", "sk-012…"},
		{"addr", "0.0.0.0:1", "0.0.0.0:1"},
	}
	for _, tt := range tests {
		if got := maskSecret(tt.flag, tt.value); got != tt.want {
			t.Errorf("maskSecret(%s, %q) = %q, want %q", tt.flag, tt.value, got, tt.want)
		}
	}
}

// --check-config's output is itself a configuration file that gives the same settings.
func TestWriteSettings_RoundTrip(t *testing.T) {
	var u Up
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	u.Flags(fs)
	if err := fs.Parse([]string{"--providers", "4", "--chaos", "drop=0.5", "--credit", "12.50", "--sim-tps", "0"}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteSettings(&out, fs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "config:") {
		t.Errorf("the settings name the file:\n%s", out.String())
	}
	var again Up
	fs2 := flag.NewFlagSet("up", flag.ContinueOnError)
	again.Flags(fs2)
	if err := LoadFlagFile(fs2, writeConfig(t, "up.yaml", out.String())); err != nil {
		t.Fatalf("LoadFlagFile(its own output) = %v\n%s", err, out.String())
	}
	if !reflect.DeepEqual(again, u) {
		t.Errorf("read back %+v, want %+v", again, u)
	}
}

// Whatever the file holds, loading it returns an error or settings, never a panic.
func FuzzLoadFlagFile(f *testing.F) {
	for _, seed := range []string{"addr: 0.0.0.0:1\n", "adr: x\n", "- a\n", "a: [b]\n", "a: &x 1\nb: *x\n", "---\n---\n", "? [a]\n: b\n", "drain-timeout: !!int 5\n"} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
		new(Coordinator).Flags(fs)
		LoadFlagFile(fs, path)
	})
}
