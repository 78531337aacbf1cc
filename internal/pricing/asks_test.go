package pricing_test

import (
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The ask changes at a window's edge, on the provider's clock; the first window open wins;
// outside every window the flat ask holds; Until is the next instant the ask changes.
func TestAsks_At(t *testing.T) {
	a, err := pricing.Compile(&protocol.AskSchedule{Timezone: "Europe/Berlin", Windows: []protocol.AskWindow{
		{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 300, OutputPrice: 600},
		{Name: "night", When: "daily 22:00-06:00", InputPrice: 50, OutputPrice: 100},
		{Name: "shadowed", When: "mon 10:00-11:00", InputPrice: 1, OutputPrice: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	loc := berlin(t)
	at := func(day, h, m int) time.Time { return time.Date(2026, 12, day, h, m, 0, 0, loc) } // Dec 7 2026 is a Monday
	tests := []struct {
		name   string
		t      time.Time
		want   pricing.Ask
		wantIn money.Price
	}{
		{"just before peak", at(7, 8, 59), pricing.Ask{Input: 100, Output: 200, Until: at(7, 9, 0)}, 100},
		{"peak opens", at(7, 9, 0), pricing.Ask{Input: 300, Output: 600, Window: "peak", Until: at(7, 18, 0)}, 300},
		{"peak hides a later window", at(7, 10, 30), pricing.Ask{Input: 300, Output: 600, Window: "peak", Until: at(7, 18, 0)}, 300},
		{"evening: flat", at(7, 20, 0), pricing.Ask{Input: 100, Output: 200, Until: at(7, 22, 0)}, 100},
		{"night, past midnight", at(8, 3, 0), pricing.Ask{Input: 50, Output: 100, Window: "night", Until: at(8, 6, 0)}, 50},
		{"saturday: no peak", at(12, 12, 0), pricing.Ask{Input: 100, Output: 200, Until: at(12, 22, 0)}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.At(tt.t, 100, 200)
			if got.Input != tt.want.Input || got.Output != tt.want.Output || got.Window != tt.want.Window || !got.Until.Equal(tt.want.Until) {
				t.Errorf("At(%s) = %+v; want %+v", tt.t, got, tt.want)
			}
		})
	}
	// The same instant in UTC reads the provider's clock all the same.
	if got := a.At(at(7, 9, 0).UTC(), 100, 200); got.Window != "peak" {
		t.Errorf("At in UTC = %+v; want peak", got)
	}
	var none *pricing.Asks
	if got := none.At(at(7, 9, 0), 100, 200); got != (pricing.Ask{Input: 100, Output: 200}) {
		t.Errorf("no schedule: %+v; want the flat ask, never changing", got)
	}
}

// A schedule a node sends is refused when it is hostile or makes no sense, with a short error.
func TestCompile_Refuses(t *testing.T) {
	win := func(mod func(*protocol.AskWindow)) *protocol.AskSchedule {
		w := protocol.AskWindow{Name: "peak", When: "mon-fri 09:00-18:00", InputPrice: 1, OutputPrice: 1}
		mod(&w)
		return &protocol.AskSchedule{Timezone: "UTC", Windows: []protocol.AskWindow{w}}
	}
	many := &protocol.AskSchedule{Timezone: "UTC"}
	for i := range protocol.MaxAskWindows + 1 {
		many.Windows = append(many.Windows, protocol.AskWindow{Name: "w" + strings.Repeat("x", i), When: "daily 01:00-02:00"})
	}
	tests := []struct {
		name string
		s    *protocol.AskSchedule
		want string
	}{
		{"no zone", &protocol.AskSchedule{Windows: win(func(*protocol.AskWindow) {}).Windows}, "no time zone"},
		{"local zone", &protocol.AskSchedule{Timezone: "Local", Windows: win(func(*protocol.AskWindow) {}).Windows}, "no time zone"},
		{"unknown zone", &protocol.AskSchedule{Timezone: "Mars/Olympus", Windows: win(func(*protocol.AskWindow) {}).Windows}, "unknown time zone"},
		{"no windows", &protocol.AskSchedule{Timezone: "UTC"}, "no windows"},
		{"too many windows", many, "too many windows: 17 > 16"},
		{"bad spec", win(func(w *protocol.AskWindow) { w.When = "mon 25:00-26:00" }), `"25:00" is not a time of day`},
		{"long spec", win(func(w *protocol.AskWindow) { w.When = strings.Repeat("mon ", 200) + "01:00-02:00" }), "times too long"},
		{"negative price", win(func(w *protocol.AskWindow) { w.InputPrice = -1 }), "prices must be between 0"},
		{"price over the max", win(func(w *protocol.AskWindow) { w.OutputPrice = int64(money.MaxPrice) + 1 }), "prices must be between 0"},
		{"no name", win(func(w *protocol.AskWindow) { w.Name = "" }), "no name"},
		{"control character", win(func(w *protocol.AskWindow) { w.Name = "peak\x1b[2J" }), "want letters, digits"},
		{"long name", win(func(w *protocol.AskWindow) { w.Name = strings.Repeat("p", 33) }), "name too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pricing.Compile(tt.s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile: %v; want an error with %q", err, tt.want)
			}
			if len(err.Error()) > 100 {
				t.Errorf("error %d bytes long: %q; a close reason holds at most 123", len(err.Error()), err)
			}
		})
	}
	twice := win(func(*protocol.AskWindow) {})
	twice.Windows = append(twice.Windows, twice.Windows[0])
	if _, err := pricing.Compile(twice); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("a name twice: %v", err)
	}
	if a, err := pricing.Compile(nil); a != nil || err != nil {
		t.Errorf("Compile(nil) = %v, %v; want nil, nil", a, err)
	}
}

// Whatever a node sends, Compile refuses it or compiles a schedule whose asks are the flat one
// or a window's, within money.MaxPrice, and whose Until is after the time asked about.
func FuzzCompile(f *testing.F) {
	f.Add("Europe/Berlin", "peak", "mon-fri 09:00-18:00", int64(300), int64(600), "night", "daily 22:00-06:00")
	f.Add("UTC", "a", "always", int64(0), int64(0), "b", "sun 23:00-01:00")
	f.Add("America/New_York", "x", "fri-mon 18:00-24:00", int64(money.MaxPrice), int64(1), "x", "mon 00:00-00:01")
	f.Fuzz(func(t *testing.T, zone, name1, when1 string, in, out int64, name2, when2 string) {
		a, err := pricing.Compile(&protocol.AskSchedule{Timezone: zone, Windows: []protocol.AskWindow{
			{Name: name1, When: when1, InputPrice: in, OutputPrice: out}, {Name: name2, When: when2, InputPrice: out, OutputPrice: in}}})
		if err != nil {
			if len(err.Error()) > 200 {
				t.Errorf("error of %d bytes: want it short, quoting what was sent only clipped", len(err.Error()))
			}
			return
		}
		now := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC) // Europe's clocks spring forward at 01:00 UTC
		for range 20 {
			ask := a.At(now, 7, 9)
			if ask.Input < 0 || ask.Input > money.MaxPrice || ask.Output < 0 || ask.Output > money.MaxPrice {
				t.Fatalf("ask %+v out of bounds", ask)
			}
			if (ask.Window == "") != (ask.Input == 7 && ask.Output == 9 && ask.Window == "") {
				t.Fatalf("flat ask %+v with a window", ask)
			}
			if ask.Until.IsZero() {
				return
			}
			if !ask.Until.After(now) {
				t.Fatalf("Until %s not after %s", ask.Until, now)
			}
			now = ask.Until
		}
	})
}
