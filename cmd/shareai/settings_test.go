package main

import (
	"crypto/ed25519"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/config"
	"github.com/shareai/shareai/internal/coordinator"
	"github.com/shareai/shareai/internal/store/sqlstore/sqlstoretest"
)

// The flags that cmd/shareai reads itself, and that reach no component's config.
var (
	// --nats: cmd/shareai connects to NATS and hands the coordinator the connection (Bus).
	ownCoordinatorFlags = []string{"config", "check-config", "addr", "data-dir", "db", "nats", "tls-cert", "tls-key",
		"metrics-addr", "otlp-endpoint", "trace-sample", "log-level", "log-format"}
	ownUpFlags = []string{"config", "check-config", "engine", "upstream", "upstream-api-key", "sim-ttft", "sim-tps",
		"metrics-addr", "otlp-endpoint", "trace-sample", "log-level", "log-format"}
)

// Values, valid and not the defaults, of the flags written as text.
var textValues = map[string]string{
	"addr": "127.0.0.1:9999", "data-dir": "/elsewhere", "replica": "rep_test", "nats": "nats://127.0.0.1:4999", "db": "postgres://u@db.example:5432/shareai",
	"platform-fee": "7.25", "tier-prices": "gold=1.75,silver=1.25,bronze=0.25", "batch-price": "0.4", "files-dir": "/batch-files",
	"credit": "12.5", "chaos": "drop=0.25", "price-input": "0.07", "price-output": "0.11",
	"surge-floor": "1.25", "surge-ceiling": "3", "surge-target": "0.5",
}

// otherValue is a valid value of f other than its default.
func otherValue(t *testing.T, f *flag.Flag) string {
	t.Helper()
	if v, ok := textValues[f.Name]; ok {
		return v
	}
	switch v := f.Value.(flag.Getter).Get().(type) {
	case bool:
		return fmt.Sprint(!v)
	case time.Duration:
		return (2*v + 1234*time.Millisecond).String()
	case int:
		return fmt.Sprint(2*v + 1)
	case int64:
		return fmt.Sprint(2*v + 1)
	}
	t.Fatalf("--%s: give the test a valid value of it other than its default", f.Name)
	return ""
}

// leaves writes every setting in v, a struct, as path=value lines: its numbers, strings,
// booleans and arrays of them, unexported fields included; it skips what is wiring (functions,
// pointers, interfaces, maps, channels).
func leaves(b *strings.Builder, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			leaves(b, path+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.Array, reflect.Slice:
		for i := range v.Len() {
			leaves(b, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	case reflect.Bool:
		fmt.Fprintf(b, "%s=%v\n", path, v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		fmt.Fprintf(b, "%s=%d\n", path, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		fmt.Fprintf(b, "%s=%d\n", path, v.Uint())
	case reflect.Float32, reflect.Float64:
		fmt.Fprintf(b, "%s=%v\n", path, v.Float())
	case reflect.String:
		fmt.Fprintf(b, "%s=%q\n", path, v.String())
	}
}

// reached is what the components of a coordinator made from cc hold of its settings: each
// component's own config, as the component keeps it, and the coordinator's own settings.
func reached(t *testing.T, cc coordinator.Config) string {
	t.Helper()
	cc.Store = sqlstoretest.Open(t, "sqlite")
	cc.ReceiptKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the same in every run
	if cc.Replica == "" {
		cc.Replica = "rep_default" // a coordinator names itself at random without one
	}
	c := coordinator.New(cc)
	var b strings.Builder
	own := reflect.ValueOf(cc)
	for i := range own.NumField() {
		if f := own.Type().Field(i); f.Type.Kind() != reflect.Struct { // the components' configs are read from the components
			leaves(&b, "coordinator."+f.Name, own.Field(i))
		}
	}
	leaves(&b, "fleet", reflect.ValueOf(c.Fleet).Elem().FieldByName("cfg"))
	leaves(&b, "ledger", reflect.ValueOf(c.Ledger).Elem().FieldByName("cfg"))
	leaves(&b, "prober", reflect.ValueOf(c.Prober).Elem().FieldByName("cfg"))
	leaves(&b, "core", reflect.ValueOf(c.Core).Elem().FieldByName("cfg"))
	leaves(&b, "gateway", reflect.ValueOf(c.Gateway).Elem().FieldByName("cfg"))
	leaves(&b, "batch", reflect.ValueOf(c.Batches).Elem().FieldByName("cfg"))
	return b.String()
}

// diff returns the lines of b not in a.
func diff(a, b string) []string {
	al := strings.Split(a, "\n")
	var out []string
	for _, l := range strings.Split(b, "\n") {
		if l != "" && !slices.Contains(al, l) {
			out = append(out, l)
		}
	}
	return out
}

// Every setting of `shareai coordinator` and `shareai up`, changed alone from its default,
// changes what a component holds: no flag is dropped on its way from the command line (or
// file, or environment) to the part that uses it, by a missed copy in config, cmd/shareai,
// localnet or coordinator.New.
func TestSettings_ReachTheirComponents(t *testing.T) {
	t.Run("coordinator", func(t *testing.T) {
		build := func(set func(fs *flag.FlagSet)) coordinator.Config {
			var cfg config.Coordinator
			fs, _ := coordinatorFlags(&cfg)
			set(fs)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			return cfg.Build()
		}
		base := reached(t, build(func(*flag.FlagSet) {}))
		if d := diff(base, reached(t, build(func(*flag.FlagSet) {}))); len(d) > 0 {
			t.Fatalf("two coordinators of the same settings differ: %q", d)
		}
		fs, _ := coordinatorFlags(new(config.Coordinator))
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(ownCoordinatorFlags, f.Name) {
				return
			}
			v := otherValue(t, f)
			got := reached(t, build(func(fs *flag.FlagSet) { fs.Set(f.Name, v) }))
			if len(diff(base, got)) == 0 {
				t.Errorf("--%s=%s reaches no component: the coordinator's parts hold what they hold by default", f.Name, v)
			}
		})
	})
	t.Run("up", func(t *testing.T) {
		// What the network holds: its own settings, its agents' template, and what the
		// coordinator's parts hold.
		held := func(set func(fs *flag.FlagSet)) string {
			var cfg config.Up
			fs, _ := upFlags(&cfg)
			set(fs)
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			nc, err := cfg.Build()
			if err != nil {
				t.Fatal(err)
			}
			cc := nc.Coordinator
			nc.Coordinator = coordinator.Config{}
			var b strings.Builder
			leaves(&b, "localnet", reflect.ValueOf(nc))
			return b.String() + reached(t, cc)
		}
		base := held(func(*flag.FlagSet) {})
		if d := diff(base, held(func(*flag.FlagSet) {})); len(d) > 0 {
			t.Fatalf("two networks of the same settings differ: %q", d)
		}
		fs, _ := upFlags(new(config.Up))
		fs.VisitAll(func(f *flag.Flag) {
			if slices.Contains(ownUpFlags, f.Name) {
				return
			}
			v := otherValue(t, f)
			if len(diff(base, held(func(fs *flag.FlagSet) { fs.Set(f.Name, v) }))) == 0 {
				t.Errorf("--%s=%s reaches neither the network nor a component of its coordinator", f.Name, v)
			}
		})
	})
}
