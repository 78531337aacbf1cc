package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/shareai/shareai/internal/api"
)

// A split is decoded with the request, and a bad one is a 400 naming the arm at fault.
func TestSplit_Decode(t *testing.T) {
	tests := []struct {
		split       string
		want        string // the split's written form, when taken
		param, text string // the error's param and a part of its message, when refused
	}{
		{`{"b":0.2}`, "b=0.2", "", ""},
		{`{"b":0.2,"a":0.8}`, "a=0.8,b=0.2", "", ""},
		{`{"a":0.1,"b":0.2,"c":0.7}`, "a=0.1,b=0.2,c=0.7", "", ""}, // sums to 1.0000000000000002
		{`{"a":1}`, "a=1", "", ""},
		{`{}`, "", "", ""},
		{`null`, "", "", ""},
		{`[]`, "", "split", "expected an object, but got an array"},
		{`"a"`, "", "split", "expected an object"},
		{`{"a":0}`, "", "split.a", "greater than 0 and at most 1, got 0"},
		{`{"a":-0.5}`, "", "split.a", "got -0.5"},
		{`{"a":1.5}`, "", "split.a", "got 1.5"},
		{`{"a":"0.5"}`, "", "split.a", "expected a number, but got a string"},
		{`{"a":null}`, "", "split.a", "expected a number, but got null"},
		{`{"a":{"w":1}}`, "", "split.a", "expected a number, but got an object"},
		{`{"a":0.6,"b":0.6}`, "", "split", "the weights sum to 1.2"},
		{`{"":0.5}`, "", "split.", "a model name is empty"},
		{`{"a,b":0.5}`, "", "split.a,b", "cannot hold ',' or '='"},
		{`{"a":0.1,"a":0.2}`, "", "split.a", "listed twice"},
		{`{"a":0.1,"b":0.1,"c":0.1,"d":0.1,"e":0.1,"f":0.1,"g":0.1,"h":0.1,"i":0.1}`, "", "split", "at most 8 models"},
	}
	for _, tt := range tests {
		t.Run(tt.split, func(t *testing.T) {
			var req api.ChatRequest
			err := api.Decode(strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"split":`+tt.split+`}`), &req)
			if err == nil {
				_, err = req.Job()
			}
			if tt.param == "" && tt.text == "" {
				if err != nil {
					t.Fatalf("refused: %v (param %q)", err, err.Param)
				}
				s, _ := api.ParseSplit(req.Split)
				if s.String() != tt.want {
					t.Errorf("split %s, want %s", s, tt.want)
				}
				return
			}
			if err == nil || err.Status != 400 || err.Code != api.CodeInvalidValue || err.Param != tt.param || !strings.Contains(err.Message, tt.text) {
				t.Fatalf("got %v (param %q); want 400 invalid_value on %q saying %q", err, paramOf(err), tt.param, tt.text)
			}
		})
	}
}

func paramOf(err *api.Error) string {
	if err == nil {
		return ""
	}
	return err.Param
}

// The request's model gets what the arms leave, and the written form reads back.
func TestSplit_With(t *testing.T) {
	s, err := api.ParseSplit([]byte(`{"qwen":0.2}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.With("llama").String(); got != "llama=0.8,qwen=0.2" {
		t.Errorf("with llama: %s", got)
	}
	if got := s.With("qwen").String(); got != "qwen=1" {
		t.Errorf("with qwen, listed: %s", got)
	}
	full, _ := api.ParseSplit([]byte(`{"a":0.3,"b":0.7}`))
	if got := full.With("c").String(); got != "a=0.3,b=0.7" {
		t.Errorf("a full split with another default: %s; want the default out of the draw", got)
	}
	back, rerr := api.SplitOf("llama=0.8,qwen=0.2")
	if rerr != nil || back.String() != "llama=0.8,qwen=0.2" || back[0].Share != 800_000_000 {
		t.Errorf("SplitOf: %v %v", back, rerr)
	}
	if string(s.JSON()) != `{"qwen":0.2}` {
		t.Errorf("JSON %s", s.JSON())
	}
}

// FuzzParseSplit: no split member makes ParseSplit panic; a split taken has at most
// MaxSplitArms arms, positive shares summing to about a whole at most, and a written form that
// reads back the same.
func FuzzParseSplit(f *testing.F) {
	for _, s := range []string{`{"a":0.2}`, `{"a":0.1,"b":0.2,"c":0.7}`, `{"a":1e-12}`, `{"a":"x"}`, `[1]`, `{"\u00e9":0.5}`, `{"a":0.5,"a":0.5}`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return // Decode takes only valid JSON before the member reaches ParseSplit
		}
		s, err := api.ParseSplit([]byte(raw))
		if err != nil {
			if err.Status != 400 || !strings.HasPrefix(err.Param, "split") {
				t.Fatalf("refusal %d on %q", err.Status, err.Param)
			}
			return
		}
		var sum int64
		for _, a := range s {
			if a.Share <= 0 {
				t.Fatalf("arm %q has share %d", a.Model, a.Share)
			}
			sum += a.Share
		}
		if len(s) > api.MaxSplitArms || sum > api.ShareUnit+int64(api.MaxSplitArms) {
			t.Fatalf("split %v: %d arms summing to %d", s, len(s), sum)
		}
		if back, rerr := api.SplitOf(s.String()); len(s) > 0 && (rerr != nil || back.String() != s.String()) {
			t.Fatalf("written form %q reads back as %v, %v", s, back, rerr)
		}
	})
}
