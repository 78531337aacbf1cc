package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Model roulette: the split member of a chat or text completion, ShareAI's extension, sends
// shares of an account's requests to other models ({"llama-3.1-8b": 0.8, "qwen-2.5-7b": 0.2}).
// The request's model is the default arm: it gets what the listed arms leave, and serves a
// request whose drawn arm no node serves. The core draws the arm (internal/core/roulette.go).

// Bounds of a split.
const (
	MaxSplitArms = 8
	// splitEpsilon is how far over 1 the weights may sum: decimal weights such as 0.1+0.2+0.7
	// do not sum to 1 exactly in binary.
	splitEpsilon = 1e-9
	maxArmName   = 200
)

// ShareUnit is a whole share of a split's requests: arms' shares are integer parts per
// billion, so that shares add exactly and the draw's rotation is exact.
const ShareUnit = 1_000_000_000

// Arm is one model of a split and its share of the requests, in parts per billion (ShareUnit).
type Arm struct {
	Model string
	Share int64
}

// Split is the arms of a model roulette, by model name.
type Split []Arm

// ParseSplit reads a request's split member: a JSON object of at most MaxSplitArms model names,
// each with a weight in (0, 1], the weights summing to at most 1. It returns nil for a member
// not set or null, and the buyer's 400 naming "split.<model>" for a bad arm.
func ParseSplit(raw json.RawMessage) (Split, *Error) {
	if !isSet(raw) {
		return nil, nil
	}
	if err := (rawField{"split", raw, "{"}).check(); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.Token() // '{': checked above
	var (
		s   Split
		sum float64
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, BadRequest("split", CodeInvalidValue, "Invalid 'split': %v.", err)
		}
		model := tok.(string) // an object's member name: always a string
		param := "split." + model
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, BadRequest(param, CodeInvalidValue, "Invalid '%s': %v.", param, err)
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, BadRequest(param, CodeInvalidValue, "Invalid type for '%s': expected a number, but got %s instead.", param, kindOfValue(v))
		}
		w, err := n.Float64()
		if err != nil || w <= 0 || w > 1 {
			return nil, BadRequest(param, CodeInvalidValue, "Invalid '%s': a weight is a number greater than 0 and at most 1, got %s.", param, n)
		}
		if err := checkArmName(model, param); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(s, func(a Arm) bool { return a.Model == model }) {
			return nil, BadRequest(param, CodeInvalidValue, "Invalid 'split': the model '%s' is listed twice.", model)
		}
		if len(s) == MaxSplitArms {
			return nil, BadRequest("split", CodeInvalidValue, "Invalid 'split': at most %d models, got more.", MaxSplitArms)
		}
		sum += w
		s = append(s, Arm{Model: model, Share: max(int64(math.Round(w*ShareUnit)), 1)})
	}
	if sum > 1+splitEpsilon {
		return nil, BadRequest("split", CodeInvalidValue, "Invalid 'split': the weights sum to %s; they may sum to at most 1 (the request's model gets what they leave).",
			strconv.FormatFloat(sum, 'f', -1, 64))
	}
	if len(s) == 0 {
		return nil, nil // {}: no split
	}
	slices.SortFunc(s, func(a, b Arm) int { return strings.Compare(a.Model, b.Model) })
	return s, nil
}

// checkArmName refuses a model name a split cannot hold: empty, too long, or with the ',' or
// '=' of the split's written form (String).
func checkArmName(model, param string) *Error {
	switch {
	case strings.TrimSpace(model) == "":
		return BadRequest(param, CodeInvalidValue, "Invalid 'split': a model name is empty.")
	case len(model) > maxArmName:
		return BadRequest("split", CodeInvalidValue, "Invalid 'split': a model name is longer than %d bytes.", maxArmName)
	case strings.ContainsAny(model, ",="):
		return BadRequest(param, CodeInvalidValue, "Invalid '%s': a model name cannot hold ',' or '='.", param)
	}
	return nil
}

// kindOfValue names the JSON kind of a value encoding/json decoded into an any.
func kindOfValue(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case []any:
		return "an array"
	}
	return "an object"
}

// With returns the split as it applies to a request for model, the default arm: model gets the
// share the arms leave (added to its own, when listed). The result is sorted by model.
func (s Split) With(model string) Split {
	var sum int64
	for _, a := range s {
		sum += a.Share
	}
	left := ShareUnit - sum
	if left <= 0 {
		return s
	}
	out := slices.Clone(s)
	if i := slices.IndexFunc(out, func(a Arm) bool { return a.Model == model }); i >= 0 {
		out[i].Share += left
		return out
	}
	out = append(out, Arm{Model: model, Share: left})
	slices.SortFunc(out, func(a, b Arm) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// Models are the split's models, in its order.
func (s Split) Models() []string {
	ms := make([]string, len(s))
	for i, a := range s {
		ms[i] = a.Model
	}
	return ms
}

// String is the split's written form, as usage records keep it: "model=weight" by model,
// comma-separated, each weight as a decimal fraction ("llama-3.1-8b=0.8,qwen-2.5-7b=0.2").
func (s Split) String() string {
	var b strings.Builder
	for i, a := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.Model)
		b.WriteByte('=')
		b.WriteString(a.Weight())
	}
	return b.String()
}

// Weight is the arm's share as a decimal fraction of the requests ("0.2").
func (a Arm) Weight() string {
	return strconv.FormatFloat(float64(a.Share)/ShareUnit, 'f', -1, 64)
}

// JSON is the split as a request's split member, compact, as a key stores its default.
func (s Split) JSON() []byte {
	b := []byte{'{'}
	for i, a := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, a.Model)
		b = append(b, ':')
		b = append(b, a.Weight()...)
	}
	return append(b, '}')
}

// SplitOf reads String's form back, as usage records keep it.
func SplitOf(text string) (Split, error) {
	if text == "" {
		return nil, nil
	}
	var s Split
	for part := range strings.SplitSeq(text, ",") {
		model, w, ok := strings.Cut(part, "=")
		f, err := strconv.ParseFloat(w, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("split %q: arm %q is not model=weight", text, part)
		}
		s = append(s, Arm{Model: model, Share: int64(math.Round(f * ShareUnit))})
	}
	if len(s) == 0 {
		return nil, errors.New("empty split")
	}
	return s, nil
}
