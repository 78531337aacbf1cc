package matcher

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shareai/shareai/internal/money"
)

func TestParsePrefs(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Prefs
	}{
		{"absent", ``, Prefs{}},
		{"null", `null`, Prefs{}},
		{"empty", `{}`, Prefs{}},
		{"lists", `{"order":["n1","acct"],"only":["a"],"ignore":["b","c"]}`,
			Prefs{Order: []string{"n1", "acct"}, Only: []string{"a"}, Ignore: []string{"b", "c"}}},
		{"empty list is unset", `{"only":[]}`, Prefs{}},
		{"null field is unset", `{"sort":null,"max_price":null,"regions":null}`, Prefs{}},
		{"allow_fallbacks", `{"allow_fallbacks":false}`, Prefs{AllowFallbacks: ptr(false)}},
		{"sort", `{"sort":"throughput"}`, Prefs{Sort: SortThroughput}},
		{"max_price numbers", `{"max_price":{"prompt":0.5,"completion":1.25}}`,
			Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0.5")), Completion: ptr(usd("1.25"))}}},
		{"max_price exact", `{"max_price":{"prompt":0.000000001,"completion":"0.1"}}`,
			Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0.000000001")), Completion: ptr(usd("0.1"))}}},
		{"max_price zero and integer", `{"max_price":{"prompt":0,"completion":3}}`,
			Prefs{MaxPrice: PriceCap{Prompt: ptr(usd("0")), Completion: ptr(usd("3"))}}},
		{"max_price request and image always hold", `{"max_price":{"request":0,"image":"0.01"}}`, Prefs{}},
		{"quantizations lower case", `{"quantizations":["FP8","int4"]}`, Prefs{Quantizations: []string{"fp8", "int4"}}},
		{"require_parameters", `{"require_parameters":true}`, Prefs{RequireParameters: true}},
		{"regions", `{"regions":["EU","ch","Asia"]}`, Prefs{Regions: []string{"eu", "ch", "asia"}}},
		{"min_reliability", `{"min_reliability":0.95}`, Prefs{MinReliability: ptr(0.95)}},
		{"preferred_max_latency", `{"preferred_max_latency":1500}`, Prefs{PreferredMaxLatency: 1500 * time.Millisecond}},
		{"preferred_max_latency fraction", `{"preferred_max_latency":0.5}`, Prefs{PreferredMaxLatency: 500 * time.Microsecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePrefs(json.RawMessage(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestParsePrefs_Errors(t *testing.T) {
	tests := []struct {
		raw, field string
	}{
		{`[]`, "provider"},
		{`"price"`, "provider"},
		{`{"sort":"cheapest"}`, "provider.sort"},
		{`{"sort":1}`, "provider.sort"},
		{`{"Sort":"price"}`, "provider.Sort"},
		{`{"data_collection":"deny"}`, "provider.data_collection"},
		{`{"order":"n1"}`, "provider.order"},
		{`{"only":[1]}`, "provider.only"},
		{`{"ignore":["a",""]}`, "provider.ignore[1]"},
		{`{"allow_fallbacks":"no"}`, "provider.allow_fallbacks"},
		{`{"max_price":0.5}`, "provider.max_price"},
		{`{"max_price":{"prompt":-1}}`, "provider.max_price.prompt"},
		{`{"max_price":{"prompt":1e-7}}`, "provider.max_price.prompt"},
		{`{"max_price":{"prompt":0.0000000001}}`, "provider.max_price.prompt"},
		{`{"max_price":{"completion":"cheap"}}`, "provider.max_price.completion"},
		{`{"max_price":{"completion":true}}`, "provider.max_price.completion"},
		{`{"max_price":{"prompt":2000000}}`, "provider.max_price.prompt"},
		{`{"max_price":{"tokens":1}}`, "provider.max_price.tokens"},
		{`{"quantizations":"fp8"}`, "provider.quantizations"},
		{`{"require_parameters":1}`, "provider.require_parameters"},
		{`{"regions":["eu","europe"]}`, "provider.regions[1]"},
		{`{"regions":["uk"]}`, "provider.regions[0]"},
		{`{"regions":["xx"]}`, "provider.regions[0]"},
		{`{"regions":"eu"}`, "provider.regions"},
		{`{"min_reliability":1.5}`, "provider.min_reliability"},
		{`{"min_reliability":"0.5"}`, "provider.min_reliability"},
		{`{"preferred_max_latency":-1}`, "provider.preferred_max_latency"},
		{`{"preferred_max_latency":1e300}`, "provider.preferred_max_latency"},
		{`{"regions":["zz"],"only":[2]}`, "provider.only"}, // fields in name order
		{`{"order":[` + strings.Repeat(`"a",`, maxListLen) + `"a"]}`, "provider.order"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			_, err := ParsePrefs(json.RawMessage(tt.raw))
			fe, ok := errors.AsType[*FieldError](err)
			if !ok {
				t.Fatalf("got %v; want a *FieldError", err)
			}
			if fe.Field != tt.field || !strings.HasPrefix(err.Error(), tt.field+": ") {
				t.Errorf("error %q names %q; want %q", err, fe.Field, tt.field)
			}
		})
	}
	_, err := ParsePrefs(json.RawMessage(`{"regions":["uk"]}`))
	if !strings.Contains(err.Error(), "gb") {
		t.Errorf("%v; want a hint that the United Kingdom is gb", err)
	}
}

func TestPrefs_Merge(t *testing.T) {
	key := Prefs{Order: []string{"k"}, Only: []string{"k"}, Ignore: []string{"k"}, AllowFallbacks: ptr(false), Sort: SortLatency,
		MaxPrice: PriceCap{Prompt: ptr(usd("1")), Completion: ptr(usd("2"))}, Quantizations: []string{"fp8"}, RequireParameters: true,
		Regions: []string{"eu"}, MinReliability: ptr(0.9), PreferredMaxLatency: time.Second}
	tests := []struct {
		name      string
		req, want Prefs
	}{
		{"empty request takes the defaults", Prefs{}, key},
		{"request wins field by field",
			Prefs{Order: []string{"r"}, AllowFallbacks: ptr(true), MaxPrice: PriceCap{Completion: ptr(usd("3"))}, Regions: []string{"us"}},
			Prefs{Order: []string{"r"}, Only: []string{"k"}, Ignore: []string{"k"}, AllowFallbacks: ptr(true), Sort: SortLatency,
				MaxPrice: PriceCap{Prompt: ptr(usd("1")), Completion: ptr(usd("3"))}, Quantizations: []string{"fp8"}, RequireParameters: true,
				Regions: []string{"us"}, MinReliability: ptr(0.9), PreferredMaxLatency: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.req.Merge(key); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
	if got := key.Merge(Prefs{}); !reflect.DeepEqual(got, key) {
		t.Errorf("merging zero defaults changed %+v to %+v", key, got)
	}
}

func FuzzParsePrefs(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"sort":"latency","regions":["eu","DE"]}`,
		`{"max_price":{"prompt":0.5,"completion":"1.25"}}`, `{"order":["a"],"allow_fallbacks":false}`,
		`{"min_reliability":0.9,"preferred_max_latency":250}`, `{"quantizations":["fp8"],"require_parameters":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParsePrefs(raw)
		if err != nil {
			if _, ok := errors.AsType[*FieldError](err); !ok || !strings.HasPrefix(err.Error(), "provider") {
				t.Fatalf("error %v is not a *FieldError naming a provider field", err)
			}
			return
		}
		switch p.Sort {
		case "", SortPrice, SortLatency, SortThroughput:
		default:
			t.Fatalf("sort %q accepted", p.Sort)
		}
		for _, r := range p.Regions {
			if !isRegionName(r) {
				t.Fatalf("region %q accepted", r)
			}
		}
		for _, c := range []*money.Price{p.MaxPrice.Prompt, p.MaxPrice.Completion} {
			if c != nil && (*c < 0 || *c > money.MaxPrice) {
				t.Fatalf("price cap %v accepted", *c)
			}
		}
		if m := p.MinReliability; m != nil && !(*m >= 0 && *m <= 1) {
			t.Fatalf("min_reliability %v accepted", *m)
		}
		if p.PreferredMaxLatency < 0 || p.PreferredMaxLatency > maxLatency {
			t.Fatalf("preferred_max_latency %v accepted", p.PreferredMaxLatency)
		}
		Match(Request{Model: model, Prefs: p, Rand: seeded()}, []Candidate{cand("a"), cand("b", region("us"))})
	})
}
