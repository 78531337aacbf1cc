package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sampleProviderYAML = `# a provider's node
coordinator: https://coord.example:8443
token: spt-from-file
data_dir: /var/lib/shareai
name: rig-1
region: de
max_concurrent: 2
engine:
  kind: ollama
  url: http://127.0.0.1:11434
  pull: [llama3.1:8b, qwen2.5:7b]
price: {input: "0.10", output: 0.30}
offers:
  - model: llama3.1:8b
    quantization: Q4_K_M
    context_length: 8192
    max_concurrent: 4
    price: {output: "0.25"}
  - model: qwen2.5:7b
availability:
  timezone: Europe/Berlin
  windows: mon-fri 08:00-18:00, 22:30-01:00
  drain: 5m
guard:
  step_aside: false
  quiet_period: 2m
  max_temperature_c: 83
  resume_temperature_c: 75
  engine_processes: [ollama]
log: {level: debug}
`

// loadProvider loads a provider's configuration as the command does: file, environment, flags.
func loadProvider(t *testing.T, yaml string, env map[string]string, args ...string) (Provider, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var p Provider
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	p.Flags(fs)
	if err := p.LoadFile(fs, path); err != nil {
		return p, err
	}
	if err := Bind(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return p, nil
}

func TestProvider_LoadFile(t *testing.T) {
	p, err := loadProvider(t, sampleProviderYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"coordinator", p.Coordinator, "https://coord.example:8443"},
		{"token", p.Token, "spt-from-file"},
		{"engine", p.Engine, "ollama"},
		{"pull", p.PullList(), []string{"llama3.1:8b", "qwen2.5:7b"}},
		{"max_concurrent", p.MaxConcurrent, 2},
		{"price (a YAML number)", p.Ask, Ask{Input: "0.10", Output: "0.30"}},
		{"offers", len(p.Offers), 2},
		{"offer 0", p.Offers[0].Quantization + " " + p.Offers[0].Price.Output, "Q4_K_M 0.25"},
		{"windows", p.Availability.Windows, "mon-fri 08:00-18:00, 22:30-01:00"},
		{"drain", p.Availability.Drain, 5 * time.Minute},
		{"step aside", p.Guard.StepAside, false},
		{"quiet period", p.Guard.QuietPeriod, 2 * time.Minute},
		{"busy utilization (default)", p.Guard.BusyUtilization, 30.0},
		{"temperature", [2]float64{p.Guard.MaxTemperatureC, p.Guard.ResumeTemperatureC}, [2]float64{83, 75}},
		{"log level", p.Log.Level, "debug"},
		{"control (default)", p.Control, DefaultControl},
	}
	for _, c := range checks {
		if !equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	in, out, err := p.Offers[0].Prices(p.Ask)
	if err != nil || in.String() != "0.1" || out.String() != "0.25" {
		t.Errorf("offer 0 prices = %v, %v, %v; want the node's input price and its own output price", in, out, err)
	}
}

func equal(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok && bok {
		return strings.Join(as, ",") == strings.Join(bs, ",")
	}
	return a == b
}

// The environment overrides the file, and flags override both.
func TestProvider_Precedence(t *testing.T) {
	env := map[string]string{"SHAREAI_PROVIDER_TOKEN": "spt-from-env", "SHAREAI_REGION": "fr"}
	p, err := loadProvider(t, sampleProviderYAML, env, "--region", "nl")
	if err != nil {
		t.Fatal(err)
	}
	if p.Token != "spt-from-env" || p.Region != "nl" || p.Name != "rig-1" {
		t.Errorf("token %q region %q name %q; want the environment's token, the flag's region, the file's name", p.Token, p.Region, p.Name)
	}
}

// --help shows the file's and the environment's settings as defaults, but never a credential.
func TestProvider_HelpHidesSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte("token: spt-SECRET-FROM-FILE\nengine: {kind: openai, url: http://e:8000/v1, api_key: sk-UPSTREAM-SECRET}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var p Provider
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	p.Flags(fs)
	if err := p.LoadFile(fs, path); err != nil {
		t.Fatal(err)
	}
	if err := Bind(fs, func(k string) string { return map[string]string{"SHAREAI_PROVIDER_TOKEN": "spt-SECRET-FROM-ENV"}[k] }); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	if help := b.String(); strings.Contains(help, "SECRET") || !strings.Contains(help, "http://e:8000/v1") {
		t.Errorf("--help shows a credential, or not the file's settings:\n%s", help)
	}
	if p.Token != "spt-SECRET-FROM-ENV" || p.UpstreamAPIKey != "sk-UPSTREAM-SECRET" {
		t.Errorf("token %q, upstream key %q; want them set all the same", p.Token, p.UpstreamAPIKey)
	}
}

func TestProvider_LoadFileErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"misspelt key", "coordinator: http://c:1\nenigne: {kind: sim}\n", `line 2: unknown setting "enigne"`},
		{"misspelt nested key", "guard:\n  max_temp: 80\n", `line 2: unknown setting "max_temp"`},
		{"not a number", "max_concurrent: many\n", `max_concurrent: "many"`},
		{"not a duration", "guard:\n  quiet_period: soon\n", "line 2: cannot unmarshal !!str `soon` into a duration such as 5m or 30s"},
		{"not YAML", "coordinator: [\n", "did not find expected node content"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadProvider(t, tt.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadFile() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestProvider_ValidateFileSettings(t *testing.T) {
	tests := []struct {
		name, yaml, field string
	}{
		{"offer without model", "token: t\noffers: [{quantization: Q4_0}]\n", "offers[0].model"},
		{"offer twice", "token: t\noffers: [{model: a}, {model: a}]\n", "offers[1].model"},
		{"offer price", "token: t\noffers: [{model: a, price: {input: cheap}}]\n", "offers[0].price.input"},
		{"offers and models", "token: t\nmodels: [b]\noffers: [{model: a}]\n", "models"},
		{"time zone", "token: t\navailability: {timezone: Mars/Olympus}\n", "timezone"},
		{"resume above limit", "token: t\nguard: {max_temperature_c: 80, resume_temperature_c: 85}\n", "guard.resume_temperature_c"},
		{"control not loopback", "token: t\ncontrol: 0.0.0.0:7071\n", "control"},
		{"pull without ollama", "token: t\nengine: {kind: sim, pull: [a]}\n", "pull"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadProvider(t, tt.yaml, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("Validate() = %v, want an error about %s", err, tt.field)
			}
		})
	}
}

func TestConfigPath(t *testing.T) {
	env := func(k string) string { return map[string]string{"SHAREAI_CONFIG": "/etc/env.yaml"}[k] }
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--config", "a.yaml"}, "a.yaml"},
		{[]string{"--region=de", "-config=b.yaml"}, "b.yaml"},
		{[]string{"--region", "de"}, "/etc/env.yaml"},
		{[]string{"--", "--config", "c.yaml"}, "/etc/env.yaml"},
	}
	for _, tt := range tests {
		if got := ConfigPath(tt.args, env); got != tt.want {
			t.Errorf("ConfigPath(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}
