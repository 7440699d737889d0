// Package schema embeds the CUE schemas of every spec kind and compiles them
// once.
package schema

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/parser"
)

//go:embed *.cue
var files embed.FS

// FS returns the schema files, for writing them out for `cue vet`.
func FS() fs.FS { return files }

var (
	extraMu sync.Mutex
	extra   = map[string][]byte{}
)

// Add registers one more schema file, for a kind registered outside this
// package; it is compiled with the embedded files.
func Add(name string, src []byte) {
	extraMu.Lock()
	defer extraMu.Unlock()
	if _, dup := extra[name]; dup {
		panic("schema: file added twice: " + name)
	}
	if _, err := fs.Stat(files, name); err == nil {
		panic("schema: file added twice: " + name)
	}
	extra[name] = src
}

// Names returns the schema file names, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(files, ".")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	extraMu.Lock()
	for n := range extra {
		names = append(names, n)
	}
	extraMu.Unlock()
	sort.Strings(names)
	return names
}

// ReadFile returns a schema file's source.
func ReadFile(name string) ([]byte, error) {
	extraMu.Lock()
	src, ok := extra[name]
	extraMu.Unlock()
	if ok {
		return src, nil
	}
	return files.ReadFile(name)
}

// Compile builds the schema package in ctx as one instance of its files,
// without the module loader (the schemas import only the standard library).
func Compile(ctx *cue.Context) (cue.Value, error) { return compile(ctx) }

// CompileWithComments is Compile keeping the schemas' comments on their
// fields, for the reference pages (slower: validation does not need them).
func CompileWithComments(ctx *cue.Context) (cue.Value, error) {
	return compile(ctx, parser.ParseComments)
}

func compile(ctx *cue.Context, opts ...parser.Option) (cue.Value, error) {
	inst := build.NewContext().NewInstance("setpoint.dev/schema", nil)
	for _, name := range Names() {
		src, err := ReadFile(name)
		if err != nil {
			return cue.Value{}, fmt.Errorf("reading schema %s: %w", name, err)
		}
		f, err := parser.ParseFile(path.Join("schema", name), src, opts...)
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
