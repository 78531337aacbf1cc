package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runConfig runs `shareai ARGS…` and returns its exit code, stdout and stderr.
func runConfig(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func configFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The coordinator and `up` take their settings from the file, then the environment, then the
// flags; --check-config prints what results, the database password masked, and starts nothing.
func TestConfigFile_Precedence(t *testing.T) {
	const password = "HUNTER2"
	file := configFile(t, `addr: 0.0.0.0:9000
data-dir: /from/file
log-level: warn
drain-timeout: 1m
platform-fee: "7.5"
`)
	t.Setenv("SHAREAI_DATA_DIR", "/from/env")
	t.Setenv("SHAREAI_LOG_LEVEL", "debug")
	t.Setenv("SHAREAI_DB", "postgres://shareai:"+password+"@db.example:5432/shareai")
	t.Run("coordinator", func(t *testing.T) {
		code, out, errb := runConfig(t, "coordinator", "--config", file, "--log-level", "error", "--check-config")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb)
		}
		for _, w := range []string{"addr: 0.0.0.0:9000\n", "data-dir: /from/env\n", "log-level: error\n", "drain-timeout: 1m0s\n",
			"platform-fee: 7.5\n", "db: postgres://shareai@db.example:5432/shareai\n", "heartbeat-interval: 5s\n"} {
			if !strings.Contains(out, w) {
				t.Errorf("--check-config printed\n%s\nwant it to hold %q", out, w)
			}
		}
		if strings.Contains(out+errb, password) {
			t.Errorf("the database password shows:\n%s%s", out, errb)
		}
	})
	t.Run("up refuses the coordinator's settings", func(t *testing.T) {
		code, _, errb := runConfig(t, "up", "--config", file, "--check-config")
		if code != 1 || !strings.Contains(errb, `line 4: unknown setting "drain-timeout"`) {
			t.Errorf("exit %d, %q; want 1 naming the line", code, errb)
		}
	})
	t.Run("up from SHAREAI_CONFIG", func(t *testing.T) {
		t.Setenv("SHAREAI_CONFIG", configFile(t, "providers: 5\nengine: sim\nsim-tps: 0\ncredit: 12\naddr: 127.0.0.1:0\n"))
		t.Setenv("SHAREAI_ENGINE", "sim")
		code, out, errb := runConfig(t, "up", "--providers", "3", "--check-config")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb)
		}
		for _, w := range []string{"providers: 3\n", "sim-tps: 0\n", "credit: 12\n", "data-dir: /from/env\n", "log-level: debug\n"} {
			if !strings.Contains(out, w) {
				t.Errorf("--check-config printed\n%s\nwant it to hold %q", out, w)
			}
		}
	})
}

// A bad file stops the program before it starts, naming the file's line and the setting; a
// secret shows in no error and no --help.
func TestConfigFile_Errors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"misspelt", "addr: 127.0.0.1:0\nadr: 0.0.0.0:8080\n", []string{`config.yaml: line 2: unknown setting "adr"`}},
		{"bad duration", "drain-timeout: soon\n", []string{`line 1: drain-timeout: "soon": want a duration`}},
		{"invalid once merged", "platform-fee: 120\nheartbeat-interval: 1ms\n", []string{"--platform-fee", "--heartbeat-interval"}},
		{"db not PostgreSQL", "db: mysql://root:HUNTER2@db:3306/shareai\n", []string{"--db: want a PostgreSQL URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errb := runConfig(t, "coordinator", "--config", configFile(t, tt.yaml), "--check-config")
			for _, w := range tt.want {
				if code != 1 || !strings.Contains(errb, w) {
					t.Errorf("exit %d, %q; want 1 and %q", code, errb, w)
				}
			}
			if strings.Contains(errb, "HUNTER2") {
				t.Errorf("the error shows the password: %s", errb)
			}
		})
	}

	t.Run("help", func(t *testing.T) {
		t.Setenv("SHAREAI_UPSTREAM_API_KEY", "sk-ENVSECRET")
		file := configFile(t, "db: postgres://u:HUNTER2@db/shareai\naddr: 0.0.0.0:7000\n")
		code, out, errb := runConfig(t, "coordinator", "--config", file, "--help")
		help := out + errb
		if code != 0 || strings.Contains(help, "HUNTER2") || !strings.Contains(help, "postgres://u@db/shareai") || !strings.Contains(help, `"0.0.0.0:7000"`) {
			t.Errorf("coordinator --help: exit %d, want the file's settings as defaults and no password:\n%s", code, help)
		}
		code, out, errb = runConfig(t, "up", "--help")
		if help := out + errb; code != 0 || strings.Contains(help, "ENVSECRET") {
			t.Errorf("up --help shows the upstream key:\n%s", help)
		}
	})
	if code, _, errb := runConfig(t, "coordinator", "--config", filepath.Join(t.TempDir(), "none.yaml")); code != 1 || !strings.Contains(errb, "none.yaml") {
		t.Errorf("missing file: exit %d, %q; want 1 naming it", code, errb)
	}
}
