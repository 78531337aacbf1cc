package api_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/shareai/shareai/internal/api"
)

// schemaMembers returns the member names of a request schema of OpenAI's OpenAPI description
// (testdata/openapi), those of the schemas it takes in with allOf included.
func schemaMembers(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile("testdata/openapi/requests.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	var add func(s schema)
	add = func(s schema) {
		if s.Ref != "" {
			ref, ok := doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
			if !ok {
				t.Fatalf("%s: no schema %s in testdata", name, s.Ref)
			}
			add(ref)
		}
		for _, sub := range s.AllOf {
			add(sub)
		}
		for m := range s.Properties {
			names = append(names, m)
		}
	}
	add(doc.Components.Schemas[name])
	slices.Sort(names)
	return slices.Compact(names)
}

type schema struct {
	Ref        string         `yaml:"$ref"`
	AllOf      []schema       `yaml:"allOf"`
	Properties map[string]any `yaml:"properties"`
}

// TestRequests_OpenAIMembers checks that the requests take every member of OpenAI's request
// schemas, and beyond them only ShareAI's documented extensions.
func TestRequests_OpenAIMembers(t *testing.T) {
	tests := []struct {
		schema     string
		req        any
		extensions []string
	}{
		{"CreateChatCompletionRequest", &api.ChatRequest{}, []string{"models", "provider", "route", "split"}},
		{"CreateCompletionRequest", &api.CompletionRequest{}, []string{"models", "provider", "route", "service_tier", "split"}},
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			openai := schemaMembers(t, tt.schema)
			if len(openai) < 15 {
				t.Fatalf("the schema has %d members: %v; testdata is not what it was", len(openai), openai)
			}
			want := slices.Sorted(slices.Values(append(openai, tt.extensions...)))
			if got := api.Members(tt.req); !slices.Equal(got, want) {
				t.Errorf("members:\n got %v\nwant %v (OpenAI's and the extensions %v)", got, want, tt.extensions)
			}
			// Decode takes each, as null: its value when a client sends none.
			for _, m := range openai {
				if err := api.Decode(strings.NewReader(`{"`+m+`":null}`), tt.req); err != nil {
					t.Errorf("%s: %v", m, err)
				}
			}
		})
	}
}
