package api

import (
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
