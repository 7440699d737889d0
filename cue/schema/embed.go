// Package schema embeds the CUE schemas of every spec kind and compiles them
// once.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
)

//go:embed *.cue
var files embed.FS

// FS returns the schema files, for writing them out for `cue vet`.
func FS() fs.FS { return files }

// Names returns the schema file names, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Compile builds the schema package in ctx as one instance of its files,
// without the module loader (the schemas import only the standard library).
func Compile(ctx *cue.Context) (cue.Value, error) {
	inst := build.NewContext().NewInstance("setpoint.dev/schema", nil)
	for _, name := range Names() {
		src, err := files.ReadFile(name)
		if err != nil {
			return cue.Value{}, fmt.Errorf("reading schema %s: %w", name, err)
		}
		f, err := parser.ParseFile(path.Join("schema", name), src)
		if err != nil {
			return cue.Value{}, fmt.Errorf("parsing schema %s: %w", name, err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return cue.Value{}, fmt.Errorf("adding schema %s: %w", name, err)
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("building schema: %w", err)
	}
	return v, nil
}
