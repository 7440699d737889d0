// Command schemas writes a JSON Schema (draft 2020-12) for every spec kind,
// generated from its CUE schema (cue/schema), into schemas/KIND.json: for
// editors (the yaml-language-server $schema modeline of the shipped specs)
// and for CI. make schemas runs it; CI checks the files are current.
//
//	go run ./hack/schemas -out schemas
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/setpoint-dev/setpoint/cue/schema"
)

func main() {
	out := flag.String("out", "schemas", "the directory to write KIND.json into")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	ctx := cuecontext.New()
	root, err := schema.Compile(ctx)
	if err != nil {
		return err
	}
	kinds := root.LookupPath(cue.ParsePath("#Kinds"))
	it, err := kinds.Fields(cue.Definitions(true))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for it.Next() {
		kind := it.Selector().String()
		b, err := Schema(ctx, it.Value(), kind)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		if err := os.WriteFile(filepath.Join(out, strings.ToLower(kind)+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Schema is the JSON Schema of one kind's CUE definition, indented.
func Schema(ctx *cue.Context, v cue.Value, kind string) ([]byte, error) {
	expr, err := jsonschema.Generate(v, &jsonschema.GenerateConfig{})
	if err != nil {
		return nil, err
	}
	sv := ctx.BuildExpr(expr)
	if sv.Err() != nil {
		return nil, sv.Err()
	}
	raw, err := sv.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
