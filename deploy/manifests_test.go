// Package deploy holds the deployment manifests (Kubernetes, compose, systemd, launchd); its
// test checks that the YAML ones parse.
package deploy

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/shareai/shareai/internal/config"
)

// Every YAML file here parses, each Kubernetes document names its apiVersion and kind, and the
// SHAREAI_ variables they set are ones the programs read.
func TestManifests_Parse(t *testing.T) {
	files, err := filepath.Glob("*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("*/*/*.yaml")
	files = append(files, more...)
	if len(files) < 6 {
		t.Fatalf("found %d YAML files, want the Kubernetes and compose manifests", len(files))
	}
	var known []string
	for _, e := range config.Env {
		known = append(known, e.Name)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			dec := yaml.NewDecoder(r)
			for i := 0; ; i++ {
				var doc map[string]any
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("document %d: %v", i+1, err)
				}
				kube := strings.HasPrefix(f, "kubernetes/") && filepath.Base(f) != "nats-values.yaml"
				if kube && (doc["apiVersion"] == nil || doc["kind"] == nil) {
					t.Errorf("document %d has no apiVersion or kind", i+1)
				}
				for _, v := range envNames(doc) {
					if !slices.Contains(known, v) {
						t.Errorf("document %d sets %s, which no program reads (config.Env)", i+1, v)
					}
				}
			}
		})
	}
}

// The compose example runs what the README says: PostgreSQL, three NATS servers, three
// coordinators, a load balancer and two providers.
func TestCompose_Services(t *testing.T) {
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]any `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"postgres", "nats-1", "nats-2", "nats-3", "coordinator-1", "coordinator-2", "coordinator-3", "lb", "provider-1", "provider-2"} {
		if _, ok := c.Services[s]; !ok {
			t.Errorf("compose.yaml has no service %s", s)
		}
	}
}

// envNames returns the SHAREAI_ variables a document sets: Kubernetes' env lists ({name: …})
// and compose's environment maps.
func envNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if n, ok := v["name"].(string); ok && strings.HasPrefix(n, "SHAREAI_") {
			out = append(out, n)
		}
		for k, x := range v {
			if strings.HasPrefix(k, "SHAREAI_") {
				out = append(out, k)
			}
			out = append(out, envNames(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, envNames(x)...)
		}
	}
	return out
}
