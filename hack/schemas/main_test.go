package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yamlv3 "go.yaml.in/yaml/v3"
)

// The committed schemas are what the CUE schemas give now (make schemas).
func TestSchemasCurrent(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	committed, _ := filepath.Glob("../../schemas/*.json")
	if len(fresh) == 0 || len(fresh) != len(committed) {
		t.Fatalf("%d schemas generated, %d committed: run make schemas and commit", len(fresh), len(committed))
	}
	for _, f := range fresh {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("../../schemas", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("schemas/%s is stale: run make schemas and commit", filepath.Base(f))
		}
	}
}

// docs are the YAML documents of a file, as JSON values.
func docs(t *testing.T, path string) ([]any, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	var out []any
	for {
		// YAML 1.2, as setpoint's loader and editors read it: "off" is a
		// string, not false.
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, err
		}
		js, err := json.Marshal(v)
		if err != nil {
			return out, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
		if err != nil {
			return out, err
		}
		out = append(out, doc)
	}
}

// check validates one document against the schema of its kind.
func check(t *testing.T, c *jsonschema.Compiler, doc any) error {
	t.Helper()
	m, ok := doc.(map[string]any)
	if !ok {
		return errors.New("not a mapping")
	}
	kind, _ := m["kind"].(string)
	path, err := filepath.Abs(filepath.Join("../../schemas", strings.ToLower(kind)+".json"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); kind == "" || err != nil {
		return errors.New("no schema for kind " + kind)
	}
	s, err := c.Compile(path)
	if err != nil {
		t.Fatalf("compiling %s: %v", path, err)
	}
	return s.Validate(doc)
}

// Every document the loader accepts, the JSON Schemas accept; and so do
// the examples of the checks only validate makes (testdata/checks: each
// breaks one such check, registered in cue/spec and listed in
// docs/kinds/checks.md), which the schemas cannot see.
func TestSchemasAcceptValid(t *testing.T) {
	var files []string
	for _, g := range []string{"../../testdata/valid/*.yaml", "../../testdata/sets/*.yaml", "../../specs/*.yaml", "../../testdata/scenarios/*/*.yaml", "../../testdata/checks/*.yaml"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("only %d files", len(files))
	}
	c := jsonschema.NewCompiler()
	for _, f := range files {
		ds, err := docs(t, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, d := range ds {
			if err := check(t, c, d); err != nil {
				t.Errorf("%s, document %d: rejected: %v", f, i+1, err)
			}
		}
	}
}

// onlyValidate are the invalid files whose every error is one only
// setpoint validate finds (a check in Go, across documents or fields, or
// beyond what JSON Schema says): the JSON Schemas accept them.
var onlyValidate = map[string]string{
	"memory-bounds.yaml":          "quantities compared across fields once parsed (max >= min, limit >= request)",
	"routegroup-backend-vip.yaml": "an endpoint equal to the RouteGroup's own VIP, compared parsed (a zero-padded port is the same one)",
	"schedule-errors.yaml":        "min <= atStart <= max, across fields",
	"scrape-errors.yaml":          "a timeout at most the interval (across fields); credentials in a URL",
	"sim-prometheus.yaml":         "the signal source checked against the provider it would answer for",
	"sim-quantities.yaml":         "a provider's config is typed by the provider's name, a condition the generated JSON Schema leaves open; and limit >= request, parsed",
	"sim-routegroups.yaml":        "a provider's config is typed by the provider's name, a condition the generated JSON Schema leaves open",
}

// Every invalid file has a document the JSON Schemas reject, but those
// only validate can judge, listed above (and those stay accepted, so the
// list is true).
func TestSchemasRejectInvalid(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/invalid/*.yaml")
	if len(files) < 20 {
		t.Fatalf("only %d files", len(files))
	}
	c := jsonschema.NewCompiler()
	for _, f := range files {
		name := filepath.Base(f)
		ds, err := docs(t, f)
		rejected := err != nil
		for _, d := range ds {
			if err := check(t, c, d); err != nil {
				rejected = true
			}
		}
		why, only := onlyValidate[name]
		switch {
		case only && rejected:
			t.Errorf("%s is listed as only validate's (%s), but the JSON Schemas reject it", name, why)
		case !only && !rejected:
			t.Errorf("%s: the JSON Schemas accept it", name)
		}
	}
}

// The shipped specs name their kind's schema for editors, in their first
// line.
func TestShippedSpecsNameTheirSchema(t *testing.T) {
	files, _ := filepath.Glob("../../specs/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d specs", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		ds, err := docs(t, f)
		if err != nil || len(ds) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		kind, _ := ds[0].(map[string]any)["kind"].(string)
		want := "# yaml-language-server: $schema=../schemas/" + strings.ToLower(kind) + ".json"
		if first != want {
			t.Errorf("%s: first line %q, want %q", f, first, want)
		}
	}
}
