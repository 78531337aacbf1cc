package config

import (
	"errors"
	"flag"
	"math"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/gateway"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/store"
)

func TestProvider_Validate(t *testing.T) {
	valid := func() Provider {
		var p Provider
		p.Flags(flag.NewFlagSet("t", flag.ContinueOnError))
		p.Token = "spt-x"
		return p
	}
	tests := []struct {
		name   string
		change func(*Provider)
		field  string // "" when valid
	}{
		{"defaults with a token", func(*Provider) {}, ""},
		{"no token", func(p *Provider) { p.Token = "" }, "token"},
		{"coordinator not a URL", func(p *Provider) { p.Coordinator = "coord:8080" }, "coordinator"},
		{"several coordinators", func(p *Provider) { p.Coordinator = "https://c1:8080, https://c2:8080" }, ""},
		{"one of several not a URL", func(p *Provider) { p.Coordinator = "https://c1:8080,c2:8080" }, "coordinator"},
		{"openai without upstream", func(p *Provider) { p.Engine = "openai" }, "upstream"},
		{"unknown engine", func(p *Provider) { p.Engine = "tpu" }, "engine"},
		{"no slots", func(p *Provider) { p.MaxConcurrent = 0 }, "max-concurrent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.change(&p)
			err := p.Validate()
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Validate() = %v, want an error about --%s", err, tt.field)
			}
		})
	}
}

func TestBind_EnvironmentSetsDefaults(t *testing.T) {
	var c Coordinator
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.Flags(fs)
	env := map[string]string{"SHAREAI_ADDR": "0.0.0.0:9999", "SHAREAI_LOG_LEVEL": "debug"}
	if err := Bind(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	if c.Addr != "0.0.0.0:9999" || c.Log.Level != "warn" {
		t.Errorf("addr %q, log level %q; want the environment's addr and the flag's level", c.Addr, c.Log.Level)
	}
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	if !strings.Contains(b.String(), "0.0.0.0:9999") {
		t.Error("--help does not show the default taken from the environment")
	}
}

func TestLimits_Validate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*gateway.Config)
		field  string // "" when valid
	}{
		{"defaults", func(*gateway.Config) {}, ""},
		{"key limits", func(g *gateway.Config) {
			g.Limits = store.RateLimits{RequestsPerMinute: 60, TokensPerMinute: 90000, Concurrent: 4}
		}, ""},
		{"negative rpm", func(g *gateway.Config) { g.Limits.RequestsPerMinute = -1 }, "key-rpm"},
		{"negative tpm", func(g *gateway.Config) { g.Limits.TokensPerMinute = -1 }, "key-tpm"},
		{"negative concurrent", func(g *gateway.Config) { g.Limits.Concurrent = -1 }, "key-concurrent"},
		{"no max_tokens", func(g *gateway.Config) { g.MaxTokensLimit = 0 }, "max-tokens-limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g gateway.Config
			limitsFlags(flag.NewFlagSet("t", flag.ContinueOnError), &g)
			tt.change(&g)
			err := validateLimits(&g)
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Validate() = %v, want an error about --%s", err, tt.field)
			}
		})
	}
	var c Coordinator
	c.Flags(flag.NewFlagSet("t", flag.ContinueOnError))
	if g := c.Coordinator.Gateway; g.MaxTokensLimit != DefaultMaxTokensLimit || g.Limits != (store.RateLimits{}) {
		t.Errorf("coordinator defaults %+v, max_tokens up to %d; want no key limits and max_tokens up to %d", g.Limits, g.MaxTokensLimit, DefaultMaxTokensLimit)
	}
}

// --nats takes nats:// and tls:// URLs, one or several; --replica a name fit for NATS subjects.
func TestCoordinator_ValidateNATS(t *testing.T) {
	tests := []struct {
		name, nats, replica string
		field               string // "" when valid
	}{
		{"none", "", "", ""},
		{"one", "nats://127.0.0.1:4222", "", ""},
		{"several", "nats://n1:4222, tls://u:pw@n2:4222", "rep-a_1", ""},
		{"http", "http://n1:4222", "", "nats"},
		{"second bad", "nats://n1:4222,n2:4222", "", "nats"},
		{"no host", "nats://", "", "nats"},
		{"replica with a dot", "nats://n1:4222", "rep.1", "replica"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Coordinator
			c.Flags(flag.NewFlagSet("t", flag.ContinueOnError))
			c.NATS, c.Coordinator.Replica = tt.nats, tt.replica
			err := c.Validate()
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("Validate() = %v, want an error about --%s", err, tt.field)
			case tt.field != "" && strings.Contains(err.Error(), "pw"):
				t.Errorf("Validate() = %v shows a password", err)
			}
		})
	}
	if got := NewReplicaName(); !strings.HasPrefix(got, "rep_") || !validReplica(got) || got == NewReplicaName() {
		t.Errorf("NewReplicaName() = %q, want rep_ and a random suffix", got)
	}
}

// Surge is off by default; once on, its flags are checked, each error naming its flag.
func TestSurge_Validate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*pricing.SurgeConfig)
		field  string // "" when valid
	}{
		{"off, whatever its settings", func(s *pricing.SurgeConfig) { s.Floor = -1 }, ""},
		{"on at the defaults", func(s *pricing.SurgeConfig) { s.Enabled = true }, ""},
		{"no floor", func(s *pricing.SurgeConfig) { s.Enabled, s.Floor = true, 0 }, "surge-floor"},
		{"ceiling below the floor", func(s *pricing.SurgeConfig) { s.Enabled, s.Floor, s.Ceiling = true, 1.5, 1.2 }, "surge-ceiling"},
		{"ceiling over 10", func(s *pricing.SurgeConfig) { s.Enabled, s.Ceiling = true, 11 }, "surge-ceiling"},
		{"target of 1", func(s *pricing.SurgeConfig) { s.Enabled, s.Target = true, 1 }, "surge-target"},
		{"target not a number", func(s *pricing.SurgeConfig) { s.Enabled, s.Target = true, math.NaN() }, "surge-target"},
		{"no smoothing", func(s *pricing.SurgeConfig) { s.Enabled, s.Smoothing = true, 0 }, "surge-smoothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s pricing.SurgeConfig
			surgeFlags(flag.NewFlagSet("t", flag.ContinueOnError), &s)
			tt.change(&s)
			err := validateSurge(&s)
			var fe *FieldError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("validateSurge() = %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field):
				t.Errorf("validateSurge() = %v, want an error about --%s", err, tt.field)
			}
		})
	}
	var c Coordinator
	c.Flags(flag.NewFlagSet("t", flag.ContinueOnError))
	if s := c.Coordinator.Fleet.Surge; s.Enabled || s.Floor != 1 || s.Ceiling != 2 || s.Target != 0.7 {
		t.Errorf("coordinator defaults %+v; want surge off, from ×1 to ×2 above 70%%", s)
	}
}
