package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/shareai/shareai/internal/jsondec"
)

// The checks of requests' values, by OpenAI's documented ranges. Each error names the JSON
// path of the value at fault in its param.

func missing(param string) *Error {
	return BadRequest(param, CodeInvalidValue, "Missing required parameter: '%s'.", param)
}

func indexed(param string, i int) string { return fmt.Sprintf("%s[%d]", param, i) }

func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

func setOrNil(raw json.RawMessage) json.RawMessage {
	if isSet(raw) {
		return raw
	}
	return nil
}

// rawField is a member kept as raw JSON, whose value must be of the JSON kinds that start with
// one of the bytes in kinds: '[' an array, '{' an object, '"' a string.
type rawField struct {
	param string
	raw   json.RawMessage
	kinds string
}

func (f rawField) check() *Error {
	if !isSet(f.raw) || strings.IndexByte(f.kinds, f.raw[0]) >= 0 {
		return nil
	}
	want := make([]string, len(f.kinds))
	for i := range len(f.kinds) {
		want[i] = kindOf(f.kinds[i])
	}
	return BadRequest(f.param, CodeInvalidValue, "Invalid type for '%s': expected %s, but got %s instead.",
		f.param, strings.Join(want, " or "), kindOf(f.raw[0]))
}

// kindOf names the kind of the JSON value that starts with c.
func kindOf(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func numberIn(param string, v *float64, lo, hi float64) *Error {
	if v == nil || *v >= lo && *v <= hi {
		return nil
	}
	return BadRequest(param, CodeInvalidValue, "Invalid '%s': expected a number between %g and %g, but got %g instead.", param, lo, hi, *v)
}

func intIn(param string, v *int, lo, hi int) *Error {
	if v == nil || *v >= lo && *v <= hi {
		return nil
	}
	return BadRequest(param, CodeInvalidValue, "Invalid '%s': expected an integer between %d and %d, but got %d instead.", param, lo, hi, *v)
}

// oneOf checks that v is one of the allowed values.
func oneOf(param, v string, allowed ...string) *Error {
	if slices.Contains(allowed, v) {
		return nil
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = "'" + a + "'"
	}
	list := quoted[len(quoted)-1]
	if len(quoted) > 1 {
		list = strings.Join(quoted[:len(quoted)-1], ", ") + " and " + list
	}
	return BadRequest(param, CodeInvalidValue, "Invalid value for '%s': %q. Supported values are: %s.", param, v, list)
}

// decodeMember decodes the raw JSON of the member at param into v, naming the path of a value
// of the wrong type from param. raw must be valid JSON of the kind v takes.
func decodeMember(param string, raw json.RawMessage, v any) *Error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field != "" {
			param += "." + te.Field
		}
		return typeError(te, param)
	}
	return BadRequest(param, CodeInvalidValue, "Invalid '%s'.", param)
}

func validateLogitBias(bias map[string]int) *Error {
	for _, token := range slices.Sorted(maps.Keys(bias)) {
		if id, err := strconv.ParseUint(token, 10, 32); err != nil || strconv.FormatUint(id, 10) != token {
			return BadRequest("logit_bias", CodeInvalidValue, "Invalid key in 'logit_bias': %q. Keys are token ids: non-negative integers.", token)
		}
		if v := bias[token]; v < -100 || v > 100 {
			return BadRequest("logit_bias", CodeInvalidValue, "Invalid value in 'logit_bias' for token %s: expected an integer between -100 and 100, but got %d instead.", token, v)
		}
	}
	return nil
}

// schemaName is what OpenAI allows as response_format.json_schema.name.
var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// validateResponseFormat checks response_format, an object already: one of OpenAI's types, and
// for json_schema a json_schema object with a name. The engine receives it as it is.
func validateResponseFormat(raw json.RawMessage) *Error {
	if !isSet(raw) {
		return nil
	}
	var f struct {
		Type       *string         `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := decodeMember("response_format", raw, &f); err != nil {
		return err
	}
	if f.Type == nil {
		return missing("response_format.type")
	}
	if err := oneOf("response_format.type", *f.Type, "text", "json_object", "json_schema"); err != nil {
		return err
	}
	if *f.Type != "json_schema" {
		return nil
	}
	if !isSet(f.JSONSchema) {
		return missing("response_format.json_schema")
	}
	if err := (rawField{"response_format.json_schema", f.JSONSchema, "{"}).check(); err != nil {
		return err
	}
	var s struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := decodeMember("response_format.json_schema", f.JSONSchema, &s); err != nil {
		return err
	}
	switch {
	case s.Name == nil:
		return missing("response_format.json_schema.name")
	case !schemaName.MatchString(*s.Name):
		return BadRequest("response_format.json_schema.name", CodeInvalidValue,
			"Invalid 'response_format.json_schema.name': %q. Use 1 to 64 letters, digits, underscores or dashes.", *s.Name)
	}
	return (rawField{"response_format.json_schema.schema", s.Schema, "{"}).check()
}

var chatRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// message is what validateMessages reads of a chat message.
type message struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// messageKeys are message's members, as jsondec.Members numbers them.
var messageKeys = []string{"role", "content", "tool_calls"}

// readMessages reads the messages as encoding/json reads them into []message, in one pass
// (jsondec), their raw members slices of raw; false for anything it does not read exactly as
// encoding/json would, which encoding/json then reads.
func readMessages(raw []byte) ([]message, bool) {
	msgs := []message{}
	d := jsondec.New(raw)
	ok := d.Array(func() bool {
		var m message
		if !d.Members(messageKeys, func(k int) bool {
			if k == 0 {
				return d.String(&m.Role)
			}
			start := d.Offset()
			if !d.Skip() {
				return false
			}
			if v := raw[start:d.Offset()]; k == 1 { // not copied: read here only
				m.Content = v
			} else {
				m.ToolCalls = v
			}
			return true
		}) {
			return false
		}
		msgs = append(msgs, m)
		return true
	})
	return msgs, ok && d.End()
}

func validateMessages(raw json.RawMessage) *Error {
	if !isSet(raw) {
		return missing("messages")
	}
	msgs, ok := readMessages(raw)
	if !ok {
		msgs = nil // not what readMessages left: encoding/json would fill its elements in place
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return BadRequest("messages", CodeInvalidValue, "Invalid 'messages': expected an array of message objects.")
		}
	}
	return checkMessages(msgs)
}

// checkMessages checks each message's role and content.
func checkMessages(msgs []message) *Error {
	if len(msgs) == 0 {
		return BadRequest("messages", CodeInvalidValue, "Invalid 'messages': empty array. Expected an array with at least one message.")
	}
	for i, m := range msgs {
		param := indexed("messages", i)
		if m.Role == "" {
			return missing(param + ".role")
		}
		if err := oneOf(param+".role", m.Role, chatRoles...); err != nil {
			return err
		}
		switch {
		case !isSet(m.Content):
			if m.Role != "assistant" || !isSet(m.ToolCalls) {
				return missing(param + ".content")
			}
		case m.Content[0] != '"' && m.Content[0] != '[':
			return BadRequest(param+".content", CodeInvalidValue,
				"Invalid type for '%s.content': expected a string or an array of content parts.", param)
		}
	}
	return nil
}

func pickMaxTokens(maxTokens, maxCompletionTokens *int) (int, *Error) {
	param, v := "max_tokens", maxTokens
	if maxCompletionTokens != nil {
		param, v = "max_completion_tokens", maxCompletionTokens
	}
	if v == nil {
		return 0, nil
	}
	if *v < 1 {
		return 0, BadRequest(param, CodeInvalidValue, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", param, *v)
	}
	return *v, nil
}

// parseStop accepts a string or an array of at most 4 strings.
func parseStop(raw json.RawMessage) ([]string, *Error) {
	if !isSet(raw) {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, BadRequest("stop", CodeInvalidValue, "Invalid 'stop': expected a string or an array of strings.")
	}
	if len(many) > 4 {
		return nil, BadRequest("stop", CodeInvalidValue, "Invalid 'stop': at most 4 stop sequences, got %d.", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// parsePrompt accepts a string or an array holding one string.
func parsePrompt(raw json.RawMessage) (string, *Error) {
	if !isSet(raw) {
		return "", missing("prompt")
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return one, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return "", BadRequest("prompt", CodeInvalidValue, "Invalid 'prompt': expected a string or an array of strings (token arrays are not supported).")
	}
	if len(many) != 1 {
		return "", Unsupported("prompt", "Invalid 'prompt': send one prompt per request, got %d.", len(many))
	}
	return many[0], nil
}
