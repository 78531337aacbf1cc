package jsondec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// What the Decoder reads, encoding/json reads the same: a string (interned or not), an
// integer, a raw value; and what it skips, encoding/json takes as valid.
func FuzzPrimitives(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `"esc \" \\ \/ \b \f \n \r \t \u00e9 \u2028 \u0000"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"東京"`, "\"\xff\"", "\"a\xe6\x88b\"", `"stop"`, `"st\u006fp"`,
		`0`, `-0`, `12`, `-12`, `01`, `1.5`, `1e3`, `-2.5E-7`, `1e400`, `0.1e-400`, `9223372036854775807`, `9223372036854775808`, `-`,
		`{"a":[1,-2.5e-3,true,false,null,"x",{}],"b":{"c":[]}}`, `[1,2`, `{"a" 1}`, `{"a":1,}`, ` [ ] `, `{"\u0041":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s, s2 string
		if d := New(b); d.String(&s) && d.End() {
			if err := json.Unmarshal(b, &s2); err != nil || s != s2 {
				t.Errorf("String(%q) = %q; encoding/json: %q, %v", b, s, s2, err)
			}
		}
		var in string
		if d := New(b); d.Interned(&in, known) && d.End() {
			if err := json.Unmarshal(b, &s2); err != nil || in != s2 {
				t.Errorf("Interned(%q) = %q; encoding/json: %q, %v", b, in, s2, err)
			}
		}
		if d := New(b); d.Skip() && d.End() && !json.Valid(b) {
			t.Errorf("Skip(%q) read what encoding/json refuses", b)
		}
		var n, n2 int
		if d := New(b); d.Int(&n) && d.End() {
			if err := json.Unmarshal(b, &n2); err != nil || n != n2 {
				t.Errorf("Int(%q) = %d; encoding/json: %d, %v", b, n, n2, err)
			}
		}
		var x, x2 float64
		if d := New(b); d.Float64(&x) && d.End() {
			if err := json.Unmarshal(b, &x2); err != nil || x != x2 && !(x != x && x2 != x2) {
				t.Errorf("Float64(%q) = %v; encoding/json: %v, %v", b, x, x2, err)
			}
		}
		var u, u2 uint64
		if d := New(b); d.Uint64(&u) && d.End() {
			if err := json.Unmarshal(b, &u2); err != nil || u != u2 {
				t.Errorf("Uint64(%q) = %d; encoding/json: %d, %v", b, u, u2, err)
			}
		}
		var raw, raw2 json.RawMessage
		if d := New(b); d.Raw(&raw) && d.End() {
			if err := json.Unmarshal(b, &raw2); err != nil || !bytes.Equal(raw, raw2) {
				t.Errorf("Raw(%q) = %q; encoding/json: %q, %v", b, raw, raw2, err)
			}
		}
	})
}

var known = map[string]string{"stop": "stop"}

// Interned spares the copy of a known string, and only of a string with no escapes.
func TestInterned(t *testing.T) {
	var s string
	d := New([]byte(`"stop"`))
	if allocs := testing.AllocsPerRun(100, func() { d.i = 0; d.Interned(&s, known) }); allocs != 0 || s != "stop" {
		t.Errorf("Interned = %q with %v allocations, want stop with none", s, allocs)
	}
	if d := New([]byte(`"st\u006fp"`)); !d.Interned(&s, known) || s != "stop" {
		t.Errorf("Interned of an escaped string = %q, want stop", s)
	}
}

// Lookup matches a key as encoding/json matches a member to a field, and gives up where
// encoding/json would match it by case folding.
func TestLookup(t *testing.T) {
	names := []string{"index", "tokens", "delta"}
	for _, tt := range []struct {
		key string
		k   int
		ok  bool
	}{
		{"index", 0, true},
		{"delta", 2, true},
		{"other", -1, true},
		{"", -1, true},
		{"Index", -1, false},
		{"DELTA", -1, false},
		{"token\u017f", -1, false}, // ſ, the long s, folds to s
		{"to\u212aens", -1, false}, // K, the Kelvin sign, folds to k
		{"\u0131ndex", -1, true},   // ı, the dotless i, folds to nothing but itself
		{"ind\xc5\xbfx", -1, true}, // ſ is S, not E
		{"indexx", -1, true},
		{"\xffndex", -1, true},
	} {
		key := []byte(tt.key)
		if k, ok := Lookup(key, names); k != tt.k || ok != tt.ok {
			t.Errorf("Lookup(%q) = %d, %v; want %d, %v", key, k, ok, tt.k, tt.ok)
		}
	}
}

// What Lookup matches, encoding/json matches the same; where it gives up, encoding/json
// matches by folding.
func FuzzLookup(f *testing.F) {
	for _, s := range []string{"index", "Index", "\u0131ndex", "token\u017f", "to\u212aens", "x", "DELTA", "d\xe9lta"} {
		f.Add([]byte(s))
	}
	names := []string{"index", "tokens", "delta"}
	f.Fuzz(func(t *testing.T, key []byte) {
		if bytes.ContainsAny(key, "\"\\") || bytes.ContainsFunc(key, func(r rune) bool { return r < 0x20 }) {
			return // not a key the Decoder hands over
		}
		var v struct {
			Index  *int `json:"index"`
			Tokens *int `json:"tokens"`
			Delta  *int `json:"delta"`
		}
		if err := json.Unmarshal([]byte(`{"`+string(key)+`":1}`), &v); err != nil {
			return
		}
		want := -1
		for i, p := range []*int{v.Index, v.Tokens, v.Delta} {
			if p != nil {
				want = i
			}
		}
		switch k, ok := Lookup(key, names); {
		case ok && k != want:
			t.Errorf("Lookup(%q) = %d; encoding/json matched %d", key, k, want)
		case !ok && want < 0:
			t.Errorf("Lookup(%q) gave up on a key encoding/json matches to nothing", key)
		}
	})
}

// Once counts the members of each object apart, nested ones included.
func TestObject_OnceByObject(t *testing.T) {
	var a, c int
	var inner bool
	d := New([]byte(`{"a":1,"b":{"a":2,"c":3},"c":4}`))
	ok := d.Object(func(key []byte) bool {
		switch string(key) {
		case "a":
			return d.Once(0) && d.Int(&a)
		case "b":
			return d.Once(1) && d.Object(func(key []byte) bool {
				inner = true
				var x int
				switch string(key) {
				case "a":
					return d.Once(0) && d.Int(&x)
				case "c":
					return d.Once(2) && d.Int(&x)
				}
				return false
			})
		case "c":
			return d.Once(2) && d.Int(&c)
		}
		return false
	})
	if !ok || !d.End() || a != 1 || c != 4 || !inner {
		t.Errorf("read %v: a %d, c %d, inner %v", ok, a, c, inner)
	}
	d = New([]byte(`{"a":1,"a":2}`))
	if d.Object(func([]byte) bool { return d.Once(0) && d.Int(&a) }) {
		t.Error("a member twice was read")
	}
}

// plainRun, eight bytes at a time, ends where the byte-by-byte loop ends.
func FuzzPlainRun(f *testing.F) {
	for _, s := range []string{"", "abcdefgh", "abcdefghijklmnop\"", "0123456\\", "\x1f", "é東京 \x7f\xff\x80 and more text\n", "aaaaaaa\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := 0
		for want < len(b) && plain[b[want]] {
			want++
		}
		if got := plainRun(b); got != want {
			t.Errorf("plainRun(%q) = %d, want %d", b, got, want)
		}
	})
}
