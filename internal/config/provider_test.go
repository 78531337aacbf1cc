package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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

// The file's ask schedules, node-wide and an offer's own, become the protocol's: a window's ask
// it does not set is the flat one (the offer's), the zone is the price's, or the availability's.
func TestProvider_AskSchedule(t *testing.T) {
	p, err := loadProvider(t, `token: t
availability: {timezone: Europe/Berlin}
price:
  input: 0.10
  output: 0.20
  windows:
    - {name: peak, when: "mon-fri 09:00-18:00", input: 0.30, output: 0.60}
    - {name: night, when: "daily 00:00-06:00", output: 0.05}
offers:
  - model: a
    price: {output: 0.40}
  - model: b
    price:
      timezone: America/New_York
      windows: [{name: weekend, when: "sat,sun 00:00-24:00", input: 0.01}]
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	in, out, _ := p.Ask.Prices()
	node, err := p.AskSchedule(in, out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"timezone":"Europe/Berlin","windows":[` +
		`{"name":"peak","when":"mon-fri 09:00-18:00","input_price":300000000,"output_price":600000000},` +
		`{"name":"night","when":"daily 00:00-06:00","input_price":100000000,"output_price":50000000}]}`
	if got := mustJSON(t, node); got != want {
		t.Errorf("node's schedule = %s; want %s", got, want)
	}
	in, out, _ = p.Offers[0].Prices(p.Ask)
	a, err := p.OfferAskSchedule(0, in, out)
	if err != nil {
		t.Fatal(err)
	}
	if a.Windows[1].OutputPrice != 50_000_000 || a.Windows[1].InputPrice != 100_000_000 || a.Windows[0].Name != "peak" {
		t.Errorf("offer a (no windows of its own): %s; want the node's windows", mustJSON(t, a))
	}
	in, out, _ = p.Offers[1].Prices(p.Ask)
	b, err := p.OfferAskSchedule(1, in, out)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"timezone":"America/New_York","windows":[{"name":"weekend","when":"sat,sun 00:00-24:00","input_price":10000000,"output_price":200000000}]}`; mustJSON(t, b) != want {
		t.Errorf("offer b: %s; want %s", mustJSON(t, b), want)
	}
	flat, err := loadProvider(t, "token: t\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := flat.AskSchedule(1, 2); s != nil || err != nil {
		t.Errorf("no windows: %v, %v; want no schedule", s, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
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

// A file's errors, from reading it or from Validate, name the setting as the file writes it,
// with its line, whatever kind of setting it is: one a flag shares, one only the file sets, an
// item of a list.
func TestProvider_FileErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		key, msg   string
	}{
		{"misspelt key", "coordinator: http://c:1\nenigne: {kind: sim}\n", 2, "", `unknown setting "enigne"`},
		{"misspelt nested key", "guard:\n  max_temp: 80\n", 2, "", `unknown setting "guard.max_temp"`},
		{"dash for underscore", "data-dir: /x\n", 1, "", `unknown setting "data-dir" (did you mean "data_dir"?)`},
		{"set twice", "region: de\nname: a\nregion: fr\n", 3, "region", "set twice (first on line 1)"},
		{"a mapping as one value", "token: t\nengine: ollama\n", 2, "engine", `want settings under it, such as engine: {kind: ollama}, not the value "ollama"`},
		{"a list for a value", "region: [de, fr]\n", 1, "region", "want a single value, not a list"},
		{"a value for a list", "models: llama3\n", 1, "models", `want a list, such as [a, b], not the value "llama3"`},
		{"flag's number", "token: t\nmax_concurrent: many\n", 2, "max_concurrent", `"many": want a whole number`},
		{"flag's duration", "token: t\navailability:\n  drain: soon\n", 3, "availability.drain", `"soon": want a duration such as 30s, 5m or 72h`},
		{"file's duration", "guard:\n  quiet_period: soon\n", 2, "guard.quiet_period", `"soon": want a duration such as 30s, 5m or 72h`},
		{"file's bool", "guard:\n  step_aside: maybe\n", 2, "guard.step_aside", `"maybe": want true or false`},
		{"file's number", "guard:\n  max_power_w: [1]\n", 2, "guard.max_power_w", "want a single value, not a list"},
		{"offer's number", "offers:\n  - model: a\n    max_concurrent: x\n", 3, "offers[0].max_concurrent", `"x": want a whole number`},
		{"offer not a mapping", "offers:\n  - llama3\n", 2, "offers[0]", `want settings under it, such as {model: llama3}, not the value "llama3"`},
		{"two documents", "region: de\n---\nregion: fr\n", 2, "", "one YAML document of settings, not several"},

		{"price", "token: t\nprice:\n  input: 0.1\n  output: lots\n", 4, "price.output", `"lots" is not an amount of USD`},
		{"engine", "token: t\nengine:\n  kind: vllm\n", 3, "engine.kind", `"vllm" is not ollama, openai or sim`},
		{"engine url", "token: t\nengine:\n  kind: openai\n  url: localhost:8000\n", 4, "engine.url", "the openai engine needs the server's base URL"},
		{"sim timing", "token: t\nengine:\n  sim_ttft: -1s\n", 3, "engine.sim_ttft", "must not be negative"},
		{"pull without ollama", "token: t\nengine:\n  kind: sim\n  pull: [a]\n", 4, "engine.pull", "only the ollama engine pulls models"},
		{"max concurrent", "token: t\nmax_concurrent: 0\n", 2, "max_concurrent", "must be at least 1"},
		{"coordinator", "coordinator: coord.example\ntoken: t\n", 1, "coordinator", "want a URL"},
		{"offer without model", "token: t\noffers:\n  - quantization: Q4_0\n", 3, "offers[0].model", "required"},
		{"offer twice", "token: t\noffers:\n  - model: a\n  - model: a\n", 4, "offers[1].model", `"a" is offered twice`},
		{"offer price", "token: t\noffers:\n  - model: a\n    price: {input: cheap}\n", 4, "offers[0].price.input", `"cheap" is not an amount of USD`},
		{"offers and models", "token: t\nmodels: [b]\noffers: [{model: a}]\n", 2, "models", "set either models or the file's offers"},
		{"ask window's price", "token: t\nprice:\n  windows:\n    - {name: peak, when: daily 09:00-17:00, input: lots}\n", 4, "price.windows[0].input", `"lots" is not an amount of USD`},
		{"ask window's times", "token: t\nprice:\n  timezone: UTC\n  windows:\n    - {name: peak, when: mon-fry 09:00-17:00}\n", 4, "price.windows", `window "peak": unknown day "fry"`},
		{"ask window without times", "token: t\nprice:\n  timezone: UTC\n  windows:\n    - {name: peak}\n", 5, "price.windows[0].when", "required"},
		{"ask window's zone", "token: t\nprice:\n  timezone: Mars/Olympus\n  windows: [{name: peak, when: daily 09:00-17:00}]\n", 4, "price.windows", "unknown time zone"},
		{"offer's ask window", "token: t\noffers:\n  - model: a\n    price:\n      timezone: UTC\n      windows: [{name: \"pe ak\", when: daily 09:00-17:00}]\n", 6, "offers[0].price.windows", "want letters, digits, - or _"},
		{"time zone", "token: t\navailability:\n  timezone: Mars/Olympus\n", 3, "availability.timezone", `"Mars/Olympus" is not an IANA time zone`},
		{"windows", "token: t\navailability:\n  windows: mon-fry 08:00-18:00\n", 3, "availability.windows", `unknown day "fry"`},
		{"negative drain", "token: t\navailability:\n  drain: -1m\n", 3, "availability.drain", "must not be negative"},
		{"temperature", "token: t\nguard:\n  max_temperature_c: -5\n", 3, "guard.max_temperature_c", "must not be negative"},
		{"resume above limit", "token: t\nguard:\n  max_temperature_c: 80\n  resume_temperature_c: 85\n", 4, "guard.resume_temperature_c", "must be below max_temperature_c"},
		{"busy utilization", "token: t\nguard: {busy_utilization_pct: 120}\n", 2, "guard.busy_utilization_pct", "between 0 and 100"},
		{"control not loopback", "token: t\ncontrol: 0.0.0.0:7071\n", 2, "control", "must be a loopback address"},
		{"region", "token: t\nregion: eu_west\n", 2, "region", `"eu_west" is not a region`},
		{"log level", "token: t\nlog:\n  level: loud\n", 3, "log.level", `"loud" is not debug, info, warn or error`},
		{"trace sample", "token: t\ntrace:\n  sample: 2\n", 3, "trace.sample", "must be between 0 and 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadProvider(t, tt.yaml, nil)
			if err == nil {
				err = p.Validate()
			}
			fe, ok := errors.AsType[*FileError](err)
			if !ok || fe.Line != tt.line || fe.Key != tt.key || !strings.Contains(fe.Msg, tt.msg) || len(leaves(err)) != 1 {
				t.Fatalf("error = %v; want one, on line %d of the file, about %q: %q", err, tt.line, tt.key, tt.msg)
			}
			if want := fmt.Sprintf("provider.yaml: line %d: ", tt.line); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

// The region is checked as the coordinator checks it at register, which refuses for good one it
// does not take: the agent refuses to start instead, naming the setting. Its ASCII letters are
// lower-cased first, as the coordinator does.
func TestProvider_Region(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		args       []string
		want       string // the region validated; "" with wantErr
		wantErr    string // the *FileError's key, or the *FieldError's field
	}{
		{"country", "token: t\nregion: de\n", nil, "de", ""},
		{"none", "token: t\n", nil, "", ""},
		{"upper case, lower-cased", "token: t\nregion: EU\n", nil, "eu", ""},
		{"words and digits", "token: t\nregion: US-East-1\n", nil, "us-east-1", ""},
		{"underscore", "token: t\nregion: eu_west\n", nil, "", "region"},
		{"space", "token: t\nregion: eu west\n", nil, "", "region"},
		{"starts with a digit", "token: t\nregion: 1eu\n", nil, "", "region"},
		{"trailing hyphen", "token: t\nregion: eu-\n", nil, "", "region"},
		{"double hyphen", "token: t\nregion: eu--west\n", nil, "", "region"},
		{"too long", "token: t\nregion: " + strings.Repeat("a", 33) + "\n", nil, "", "region"},
		{"Kelvin sign, not a k", "token: t\nregion: \u212A\n", nil, "", "region"},
		{"flag", "token: t\nregion: de\n", []string{"--region", "EU_WEST"}, "", "region"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadProvider(t, tt.yaml, nil, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v; want no error", err)
			case tt.wantErr == "":
				if p.Region != tt.want {
					t.Errorf("region %q; want %q", p.Region, tt.want)
				}
			case tt.args == nil:
				fe, ok := errors.AsType[*FileError](err)
				if !ok || fe.Key != tt.wantErr || fe.Line != 2 || len(leaves(err)) != 1 || !strings.Contains(err.Error(), "eu-west") {
					t.Errorf("Validate() = %v; want one error about %s on line 2, with an example", err, tt.wantErr)
				}
			default:
				fe, ok := errors.AsType[*FieldError](err)
				if !ok || fe.Field != tt.wantErr || len(leaves(err)) != 1 {
					t.Errorf("Validate() = %v; want one *FieldError about --%s", err, tt.wantErr)
				}
			}
		})
	}
}

// Every error of a file is reported at once.
func TestProvider_FileErrorsAllAtOnce(t *testing.T) {
	_, err := loadProvider(t, "regin: de\nmax_concurrent: x\nguard: {quiet_period: soon}\n", nil)
	for _, want := range []string{`line 1: unknown setting "regin"`, `line 2: max_concurrent: "x"`, `line 3: guard.quiet_period: "soon"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFile() = %v; want it to say %q", err, want)
		}
	}
	if _, err := loadProvider(t, "coordinator: [\n", nil); err == nil || !strings.Contains(err.Error(), "provider.yaml: yaml: line 1") {
		t.Errorf("not YAML: %v", err)
	}
}

// A value the environment or a flag gives over the file's is named by its flag; a setting left
// out everywhere is named as the file would write it, with its flag and variable.
func TestProvider_ErrorsNameWhereTheValueCameFrom(t *testing.T) {
	const file = "token: t\nengine: {kind: sim}\nprice: {input: 0.1}\nguard: {max_temperature_c: 80}\n"
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		args  []string
		field string // a *FieldError's
		key   string // or else a *FileError's, with its line
		line  int
	}{
		{"flag over the file", file, nil, []string{"--price-input", "cheap"}, "price-input", "", 0},
		{"flag the file shares with a file-only section", file, nil, []string{"--max-temperature", "-1"}, "max-temperature", "", 0},
		{"environment over the file", file, map[string]string{"SHAREAI_ENGINE": "vllm"}, nil, "engine", "", 0},
		{"flag the file leaves out", file, nil, []string{"--drain", "-1s"}, "drain", "", 0},
		{"left out everywhere", "engine: {kind: sim}\n", nil, nil, "", "token", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadProvider(t, tt.yaml, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Validate()
			if tt.field != "" {
				fe, ok := errors.AsType[*FieldError](err)
				if !ok || fe.Field != tt.field || len(leaves(err)) != 1 {
					t.Errorf("Validate() = %v; want one *FieldError about %s", err, tt.field)
				}
				return
			}
			fe, ok := errors.AsType[*FileError](err)
			if !ok || fe.Key != tt.key || fe.Line != tt.line {
				t.Fatalf("Validate() = %v; want a *FileError about %s", err, tt.key)
			}
			if want := "provider.yaml: token (--token, SHAREAI_PROVIDER_TOKEN): required"; !strings.Contains(err.Error(), want) {
				t.Errorf("Validate() = %q; want %q", err, want)
			}
		})
	}
}

// A relative data_dir in the file is the file's folder's, so that a service started from
// elsewhere keeps the node's identity; a relative --data-dir or SHAREAI_DATA_DIR is the
// working directory's, as usual.
func TestProvider_DataDirRelativeToFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("etc", 0o700); err != nil {
		t.Fatal(err)
	}
	load := func(file, yaml string, env map[string]string, args ...string) string {
		t.Helper()
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var p Provider
		fs := flag.NewFlagSet("provider", flag.ContinueOnError)
		p.Flags(fs)
		if err := p.LoadFile(fs, file); err != nil {
			t.Fatal(err)
		}
		if err := Bind(fs, func(k string) string { return env[k] }); err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return p.DataDir
	}
	abs := filepath.Join(dir, "etc", "provider.yaml")
	tests := []struct {
		name, file, yaml string
		env              map[string]string
		args             []string
		want             string
	}{
		{"relative, file by absolute path", abs, "data_dir: node\n", nil, nil, filepath.Join(dir, "etc", "node")},
		{"relative, file by relative path", "etc/provider.yaml", "data_dir: ./node\n", nil, nil, filepath.Join("etc", "node")},
		{"parent folder", abs, "data_dir: ../var/node\n", nil, nil, filepath.Join(dir, "var", "node")},
		{"absolute", abs, "data_dir: /var/lib/shareai-node\n", nil, nil, "/var/lib/shareai-node"},
		{"left out: the flag's default", abs, "region: de\n", nil, nil, "./.shareai-node"},
		{"flag", abs, "data_dir: node\n", nil, []string{"--data-dir", "mine"}, "mine"},
		{"environment", abs, "data_dir: node\n", map[string]string{"SHAREAI_DATA_DIR": "theirs"}, nil, "theirs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := load(tt.file, tt.yaml, tt.env, tt.args...); got != tt.want {
				t.Errorf("data dir = %q, want %q", got, tt.want)
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
