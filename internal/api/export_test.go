package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
)

// UnknownMember is unknownMember, for tests.
var UnknownMember = unknownMember

// Members lists the JSON members Decode takes for the struct v points to.
func Members(v any) []string {
	return slices.Sorted(maps.Keys(fieldsOf(reflect.TypeOf(v)).names))
}

// DecodeWhole is Decode without the messages cut out of a chat: encoding/json reads the body
// whole, as Decode did before.
func DecodeWhole(body []byte, v any) *Error { return decode(body, v) }

// ValidateMessages returns validateMessages' refusal of raw, and what it would be with
// encoding/json reading the messages alone.
func ValidateMessages(raw []byte) (got, std *Error) {
	got = validateMessages(raw)
	if !isSet(raw) {
		return got, got
	}
	var msgs []message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return got, BadRequest("messages", CodeInvalidValue, "Invalid 'messages': expected an array of message objects.")
	}
	return got, checkMessages(msgs)
}

// CutMember is cutMember, and ReadMessages readMessages' verdict, for tests.
var CutMember = cutMember

func ReadMessages(raw []byte) bool { _, ok := readMessages(raw); return ok }
