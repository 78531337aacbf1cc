package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/shareai/shareai/internal/jsondec"
)

// Decode reads a JSON request body into v, a pointer to a request struct, as strictly as
// OpenAI does. It answers 413 for a body over the limit set with http.MaxBytesReader, 408 for
// a body that did not arrive before the connection's read deadline, and 400 for anything that
// is not a JSON object of v's fields: a member v has no field for is "Unrecognized request
// argument supplied" (members match v's JSON names exactly, where encoding/json alone would
// also take "MODEL" for "model"), and a value of the wrong type names its JSON path. No
// message names a Go type or field.
func Decode(r io.Reader, v any) *Error {
	body, err := io.ReadAll(r)
	if err != nil {
		return readError(err)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return BadRequest("", CodeInvalidJSON, "The request body is empty; send a JSON object.")
	}
	if name, dst := bulk(v); dst != nil {
		if value, rest, ok := cutMember(body, name); ok {
			// Most of the request's bytes, kept raw: encoding/json reads the rest, in which
			// they are null, once jsondec has read them in one pass.
			if err := decode(rest, v); err != nil {
				return err
			}
			*dst = value
			return nil
		}
	}
	return decode(body, v)
}

// bulk names the member of the request v points to that holds most of its bytes and is kept
// raw (a chat's messages, a completion's prompt), and where it goes; nil for other requests.
func bulk(v any) (string, *json.RawMessage) {
	switch r := v.(type) {
	case *ChatRequest:
		return "messages", &r.Messages
	case *CompletionRequest:
		return "prompt", &r.Prompt
	}
	return "", nil
}

// decode is Decode of a body read whole, not empty.
func decode(body []byte, v any) *Error {
	err := json.Unmarshal(body, v)
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return BadRequest("", CodeInvalidJSON, "We could not parse the JSON body of your request: %v (at byte %d). Send valid JSON, with the Content-Type application/json.", se, se.Offset)
	}
	if body[0] != '{' {
		return BadRequest("", CodeInvalidJSON, "The request body must be a JSON object.")
	}
	// The body is valid JSON: an unknown member is named before any type error, as OpenAI
	// names it whatever else is wrong.
	fields := fieldsOf(reflect.TypeOf(v))
	if name, ok := unknownMember(body, fields.names); ok {
		return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: name, Code: CodeUnknownParameter,
			Message: "Unrecognized request argument supplied: " + name}
	}
	if err != nil {
		te, ok := errors.AsType[*json.UnmarshalTypeError](err)
		if !ok || te.Field == "" {
			return BadRequest("", CodeInvalidJSON, "The request body must be a JSON object.")
		}
		return typeError(te, fields.jsonPath(te.Field))
	}
	return nil
}

// cutMember returns, for a JSON object that jsondec reads whole and that has member name
// once, that member's value (a copy) and the object with null in its place; ok is false for
// anything else, which encoding/json then reads whole and words the errors of.
func cutMember(body []byte, name string) (value, rest []byte, ok bool) {
	d := jsondec.New(body)
	start, end := -1, -1
	if !d.Object(func(key []byte) bool {
		if string(key) != name {
			return d.Skip()
		}
		if start >= 0 {
			return false // twice: the last counts, as encoding/json has it
		}
		start = d.Offset()
		ok := d.Skip()
		end = d.Offset()
		return ok
	}) || !d.End() || start < 0 {
		return nil, nil, false
	}
	rest = make([]byte, 0, len(body)-(end-start)+4)
	rest = append(append(append(rest, body[:start]...), "null"...), body[end:]...)
	return bytes.Clone(body[start:end]), rest, true
}

// readError is the buyer's error for a body that could not be read whole.
func readError(err error) *Error {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: CodeRequestTooLarge,
			Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", mbe.Limit)}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &Error{Status: http.StatusRequestTimeout, Type: TypeInvalidRequest, Code: CodeRequestTimeout,
			Message: "The request body did not arrive in time; send it whole, without pausing."}
	}
	return BadRequest("", CodeInvalidJSON, "Could not read the request body: %v.", err)
}

// typeError is the buyer's error for a JSON value of the wrong type at param, in JSON's words.
func typeError(te *json.UnmarshalTypeError, param string) *Error {
	want := jsonKind(te.Type)
	got, number := strings.CutPrefix(te.Value, "number ") // "number 10.5": the number itself
	if !number {
		got = article(te.Value)
	} else if want == "an integer" && !strings.ContainsAny(got, ".eE") {
		return BadRequest(param, CodeInvalidValue, "Invalid '%s': %s is out of range.", param, got)
	}
	return BadRequest(param, CodeInvalidValue, "Invalid type for '%s': expected %s, but got %s instead.", param, want, got)
}

// jsonKind names the JSON values a Go type takes.
func jsonKind(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// article names a JSON kind as encoding/json's UnmarshalTypeError.Value has it ("string",
// "bool", "array", "object", "number") with its article.
func article(kind string) string {
	switch kind {
	case "bool":
		return "a boolean"
	case "array", "object":
		return "an " + kind
	}
	return "a " + kind
}

// structFields are the JSON names of a request struct's members, those of the structs it
// embeds included, and the Go names of those embedded structs, which encoding/json puts in
// the paths of its errors ("Routing.models") though no JSON has them.
type structFields struct {
	names    map[string]bool
	embedded map[string]bool
}

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf returns the fields of the struct t points to (or is).
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{names: map[string]bool{}, embedded: map[string]bool{}}
	f.add(t)
	fieldCache.Store(t, f)
	return f
}

func (f *structFields) add(t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case tag == "-" || !sf.IsExported() && !sf.Anonymous:
		case sf.Anonymous && tag == "":
			f.embedded[sf.Name] = true
			f.add(sf.Type)
		case tag != "":
			f.names[tag] = true
		default:
			f.names[sf.Name] = true
		}
	}
}

// jsonPath turns the path of encoding/json's UnmarshalTypeError.Field into the JSON path the
// buyer wrote, without the Go names of embedded structs.
func (f *structFields) jsonPath(path string) string {
	parts := strings.Split(path, ".")
	out := parts[:0]
	for _, p := range parts {
		if !f.embedded[p] {
			out = append(out, p)
		}
	}
	return strings.Join(out, ".")
}

// unknownMember returns the first member name of the JSON object b that is not in known. b must
// be a valid JSON object (json.Unmarshal took it), with no space before its '{': the scan does
// not check it again, and so costs one quick pass over the body.
func unknownMember(b []byte, known map[string]bool) (string, bool) {
	i := skipSpace(b, 1) // past '{'
	for i < len(b) && b[i] == '"' {
		end := stringEnd(b, i)
		if raw := b[i+1 : end-1]; plain(raw) {
			if !known[string(raw)] { // no copy: a lookup by bytes
				return string(raw), true
			}
		} else { // escapes, or bytes that encoding/json reads as U+FFFD
			var name string
			json.Unmarshal(b[i:end], &name) // valid JSON: cannot fail
			if !known[name] {
				return name, true
			}
		}
		i = skipSpace(b, end) // at ':'
		i = skipSpace(b, valueEnd(b, skipSpace(b, i+1)))
		if i >= len(b) || b[i] != ',' {
			break // '}'
		}
		i = skipSpace(b, i+1)
	}
	return "", false
}

// plain says whether a JSON string's content is ASCII without escapes: the string itself.
func plain(s []byte) bool {
	for i := range len(s) {
		if s[i] == '\\' || s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && strings.IndexByte(",}] \t\r\n", b[i]) < 0 {
		i++
	}
	return i
}
