// Package load walks a spec directory, validates every document against its
// kind's CUE schema and decodes it into the typed structs of package spec.
//
// Documents are streamed: each one is extracted, unified, validated, decoded
// and dropped before the next, so memory does not grow with the directory.
package load

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/setpoint-dev/setpoint/cue/schema"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

var (
	_ = spec.RegisterCheck(spec.Check{What: "spec files of at most 10 MiB (larger ones are refused unread); a walk reads at most 100,000 spec files and enters at most 100,000 directories", Why: spec.WhyFiles})
	_ = spec.RegisterCheck(spec.Check{What: "symlinks followed inside the directory only; loops and second links to one directory reported; hidden directories (.setpoint, .git) skipped", Why: spec.WhyFiles})
)

// MaxFiles bounds the spec files one directory walk reads (ten times the
// 10,000-document goal).
const MaxFiles = 100_000

// MaxDirs bounds the directories one walk enters, spec files or not: a
// pull request of a million empty directories must not make a walk (or
// watch's every rescan) unbounded in time and memory.
var MaxDirs = 100_000

// MaxFileSize bounds a spec file; larger files are refused unread.
const MaxFileSize = 10 << 20

// Loader validates and decodes spec documents. It is not safe for concurrent
// use: one CUE context serves every document.
type Loader struct {
	ctx    *cue.Context
	schema cue.Value
	defs   map[string]cue.Value
	// The fast path's per-kind sections and its cache of validated sections
	// (see fast.go).
	sections map[string]*kindSections
	cache    map[string][]byte
	paths    map[string]string // interned field paths
	// providerDef and simWorkload are the Environment's providers list and
	// one sim workload, for the fast path's split of a sim world's list.
	providerDef, simWorkload section
	// counts says what the fast path did (tests check it was taken).
	counts struct{ fast, leaves, splits int }
	// lineBase is the count of lines of the file before the YAML text
	// being decoded, when a file is decoded a document at a time (see
	// loadYAML); every position is shifted by it.
	lineBase int
	// NoFastPath validates every document whole (tests compare the paths).
	NoFastPath bool
	// SchemaOnly skips the per-document rules checked in Go (quantity
	// order), leaving what `cue vet` checks: the parity test uses it.
	SchemaOnly bool
	// MaxFileSize overrides the package default (tests use a small one).
	MaxFileSize int64
	// Ctx, when set, stops Load between files once it ends (an interrupt);
	// the rest are reported unchecked, once.
	Ctx context.Context
	// CUE, when set, evaluates the .cue files (see isolate.go).
	CUE CUEEvaluator
	// Progress, when set, is told after each file how many of the files
	// found are done (validate shows it on a terminal).
	Progress func(done, total int)
	emitted  []byte // see EmittedJSON
}

// New compiles the embedded schemas.
func New() (*Loader, error) {
	ctx := cuecontext.New()
	s, err := schema.Compile(ctx)
	if err != nil {
		return nil, err
	}
	l := &Loader{ctx: ctx, schema: s, defs: map[string]cue.Value{}, MaxFileSize: MaxFileSize,
		sections: map[string]*kindSections{}, cache: map[string][]byte{}, paths: map[string]string{}}
	for _, k := range spec.Kinds() {
		d := s.LookupPath(cue.MakePath(cue.Def("Kinds"), cue.Str(k)))
		if !d.Exists() {
			return nil, fmt.Errorf("kind %s is registered in Go but has no #Kinds entry in the schema", k)
		}
		l.defs[k] = d
		// Every kind now, not at its first document: the full path's
		// messages name constraints as the schema does (#ObjectName, "a
		// DNS subdomain") only once its definitions have been evaluated.
		l.sections[k] = l.prepareSections(k, d)
	}
	return l, nil
}

// Result is what loading a directory or file produced.
type Result struct {
	Files     int             `json:"files"`
	Documents []spec.Document `json:"-"`
	Diags     Diagnostics     `json:"errors"`
}

// Environment returns the directory's Environment, if exactly one was loaded.
func (r *Result) Environment() *spec.Environment {
	var env *spec.Environment
	for _, d := range r.Documents {
		if e, ok := d.(*spec.Environment); ok {
			if env != nil {
				return nil
			}
			env = e
		}
	}
	return env
}

// Specs returns the documents other than the Environment: what an engine
// plans.
func (r *Result) Specs() []spec.Document {
	out := make([]spec.Document, 0, len(r.Documents))
	for _, d := range r.Documents {
		if _, env := d.(*spec.Environment); !env {
			out = append(out, d)
		}
	}
	return out
}

// LoadDir loads every .yaml, .yml and .cue file under dir (following
// symlinks, refusing loops), then runs the cross-document checks.
func (l *Loader) LoadDir(dir string) *Result { return l.Load(dir) }

// Load loads the spec files under each path (a directory or a file) as one
// set and runs the cross-document checks over all of them. An Environment is
// required when a directory is named; named files may be checked alone.
func (l *Loader) Load(paths ...string) *Result {
	r := &Result{}
	needEnv := false
	// Every path is walked first so that the .cue files can be evaluated
	// (elsewhere, when l.CUE is set) while the YAML files load here.
	walks := make([]struct {
		files []string
		isDir bool
		diags Diagnostics
	}, len(paths))
	var all []string
	for i, p := range paths {
		walks[i].files, walks[i].isDir, walks[i].diags = walk(p)
		all = append(all, walks[i].files...)
	}
	batch := l.startCUE(all)
	defer batch.wait()
	next, stop := l.loadAll(all, batch)
	defer stop()
	done := 0
	for i, p := range paths {
		files, isDir, diags := walks[i].files, walks[i].isDir, walks[i].diags
		needEnv = needEnv || isDir
		r.Diags = append(r.Diags, diags...)
		for _, f := range files {
			fr, ok := next(done)
			done++
			if !ok {
				// A partial set would only add spurious cross-document
				// errors (no Environment): stop here.
				r.Diags = append(r.Diags, interrupted(f, len(all)-r.Files-1))
				r.Diags.Sort()
				return r
			}
			r.Files++
			r.Documents = append(r.Documents, fr.Documents...)
			r.Diags = append(r.Diags, fr.Diags...)
			if l.Progress != nil {
				l.Progress(r.Files, len(all))
			}
		}
		if isDir && len(files) == 0 && len(diags) == 0 {
			r.Diags = append(r.Diags, Diagnostic{Pos: spec.Pos{File: p}, Message: "no spec files found", Expected: "at least one .yaml, .yml or .cue file with an Environment"})
		}
	}
	// An Environment that exists but is invalid has its own errors; "no
	// Environment" would only add a wrong one.
	r.Diags = append(r.Diags, CrossCheck(r.Documents, needEnv && !invalidKind(r.Diags, "Environment"))...)
	r.Diags.Sort()
	return r
}

// parallelMin is how many files a Load has before it loads them on more
// than one core: a second loader compiles the schema anew (tens of ms).
const parallelMin = 64

// loadWorkers is how many loaders a large Load runs at once.
var loadWorkers = min(runtime.GOMAXPROCS(0), 4)

// loadAll starts loading files and returns what gives file i's result, to
// be asked for i = 0, 1, … in turn: on one core, loaded there and then;
// with more (and enough files), by a loader per core, each with its own
// CUE context (one is not safe for two goroutines), the largest files
// first; the results are taken in file order, so they, their order and the
// diagnostics are a single loader's.
//
// stop waits for the loaders to end (an interrupted Load returns before the
// files are all loaded, and l is one of them).
func (l *Loader) loadAll(files []string, batch *cueBatch) (next func(i int) (FileResult, bool), stop func()) {
	workers := loadWorkers
	if workers < 2 || len(files) < parallelMin {
		return func(i int) (FileResult, bool) { return l.loadOne(files[i], batch) }, func() {}
	}
	type result struct {
		fr FileResult
		ok bool
	}
	done := make([]chan result, len(files))
	for i := range done {
		done[i] = make(chan result, 1)
	}
	// The largest files first: one large file (an Environment listing a
	// sim world) taken last would be loaded while the other cores idle.
	// The .cue files the batch evaluates elsewhere go last: a loader
	// taking one only waits for the batch.
	order := make([]int, len(files))
	size := make([]int64, len(files))
	for i, f := range files {
		order[i] = i
		if fi, err := os.Stat(f); err == nil {
			size[i] = fi.Size()
		}
		if batch != nil && isCUE(f) {
			size[i] = -1
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size[b], size[a]) })
	var taken atomic.Int64
	var wg sync.WaitGroup
	work := func(w *Loader) {
		for {
			k := int(taken.Add(1) - 1)
			if k >= len(order) {
				return
			}
			i := order[k]
			fr, ok := w.loadOne(files[i], batch)
			done[i] <- result{fr, ok}
		}
	}
	wg.Go(func() { work(l) })
	for range workers - 1 {
		w, err := l.sibling()
		if err != nil {
			break // the first loader takes every file
		}
		wg.Go(func() { work(w) })
	}
	next = func(i int) (FileResult, bool) {
		r := <-done[i]
		return r.fr, r.ok
	}
	// Every file left is refused at once by loadOne once the context has
	// ended, so the wait is short.
	return next, wg.Wait
}

// sibling is a new loader with l's settings, for another core.
func (l *Loader) sibling() (*Loader, error) {
	w, err := New()
	if err != nil {
		return nil, err
	}
	w.NoFastPath, w.SchemaOnly, w.MaxFileSize, w.Ctx, w.CUE = l.NoFastPath, l.SchemaOnly, l.MaxFileSize, l.Ctx, l.CUE
	return w, nil
}

// LoadFile validates and decodes each document of one file, calling emit for
// every valid one. Errors of one document never stop the next.
func (l *Loader) LoadFile(path string, emit func(spec.Document)) Diagnostics {
	if l.CUE != nil && isCUE(path) {
		return l.evalOne(path, emit)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Diagnostics{{Pos: spec.Pos{File: path}, Message: "cannot read file: " + unwrapPathError(err)}}
	}
	if fi.Size() > l.MaxFileSize {
		return Diagnostics{{Pos: spec.Pos{File: path, Line: 1, Col: 1},
			Message:  fmt.Sprintf("file is %s, too large to be a spec", spec.Bytes(fi.Size())),
			Expected: fmt.Sprintf("at most %s", spec.Bytes(l.MaxFileSize))}}
	}
	// A regular file by what was opened (a FIFO swapped in since the stat
	// must not hang the reader), read through the limit: it may have grown.
	src, _, err := confine.ReadRegular(path, l.MaxFileSize, false)
	var nr *confine.NotRegularError
	switch {
	case errors.As(err, &nr):
		return Diagnostics{{Pos: spec.Pos{File: path}, Message: "cannot read file: not a regular file", Expected: "a spec file"}}
	case errors.Is(err, confine.ErrTooLarge):
		return Diagnostics{{Pos: spec.Pos{File: path, Line: 1, Col: 1}, Message: "file grew past the size limit while being read", Expected: fmt.Sprintf("at most %s", spec.Bytes(l.MaxFileSize))}}
	case err != nil:
		return Diagnostics{{Pos: spec.Pos{File: path}, Message: "cannot read file: " + unwrapPathError(err)}}
	}
	return l.LoadBytes(path, src, emit)
}

// LoadBytes is LoadFile on content already in memory; path names it in
// positions and picks the format by extension.
func (l *Loader) LoadBytes(path string, src []byte, emit func(spec.Document)) (diags Diagnostics) {
	defer func() {
		// The CUE evaluator is a large body of code fed with user input; a
		// panic there must cost one file, not the run.
		if p := recover(); p != nil {
			diags = append(diags, Diagnostic{Pos: spec.Pos{File: path}, Message: fmt.Sprintf("internal error while evaluating this file: %v", p)})
		}
		boundMessages(diags)
	}()
	if strings.HasSuffix(path, ".cue") {
		f, err := parser.ParseFile(path, src)
		if err != nil {
			return fromCUE(err, path, nil, cue.Value{}, nil, 0)
		}
		return l.doc(path, f, emit)
	}
	return l.loadYAML(path, src, emit)
}

func isEmptyDoc(n ast.Node) bool {
	switch x := n.(type) {
	case *ast.BasicLit:
		return x.Value == "null"
	case *ast.StructLit:
		return len(x.Elts) == 0
	}
	return false
}

// document validates and decodes one document (a YAML expression or a CUE
// file).
func (l *Loader) document(path string, n ast.Node, emit func(spec.Document)) Diagnostics {
	fields := l.positions(n)
	docPos := posOf(n.Pos(), path)
	if docPos.Line > 0 {
		docPos.Line += l.lineBase
	}
	kindName, diags := l.kindOf(n, fields, docPos)
	if diags != nil {
		return diags
	}
	canon, ok := []byte(nil), false
	if !l.NoFastPath {
		canon, ok = l.fast(kindName, n)
	}
	if !ok {
		var diags Diagnostics
		if canon, diags = l.full(kindName, path, n, fields, docPos); diags != nil {
			return diags
		}
	}
	kind, _ := spec.Lookup(kindName)
	doc := kind.New()
	if err := json.Unmarshal(canon, doc); err != nil {
		return Diagnostics{decodeError(canon, doc, err, fields, docPos)}
	}
	if c, ok := doc.(spec.Checker); ok && !l.SchemaOnly {
		var diags Diagnostics
		for _, fe := range c.Check() {
			diags = append(diags, Diagnostic{Pos: at(fields, fe.Path, docPos), Path: fe.Path, Message: fieldMessage(fe, fields, docPos), Expected: fe.Expected})
		}
		if diags != nil {
			return diags
		}
	}
	doc.Head().Src = spec.NewSource(docPos, fields)
	l.emitted = canon
	emit(doc)
	return nil
}

// kindOf reads the document's kind from its syntax, without evaluating it.
func (l *Loader) kindOf(n ast.Node, fields []spec.FieldPos, docPos spec.Pos) (string, Diagnostics) {
	expect := "one of " + strings.Join(spec.Kinds(), ", ")
	var decls []ast.Decl
	switch x := n.(type) {
	case *ast.File:
		decls = x.Decls
	case *ast.StructLit:
		decls = x.Elts
	default:
		return "", Diagnostics{{Pos: docPos, Message: "document is not a mapping", Expected: "a mapping with apiVersion, kind, metadata and spec"}}
	}
	for _, d := range decls {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if name, _, err := ast.LabelName(f.Label); err != nil || name != "kind" {
			continue
		}
		lit, ok := f.Value.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", Diagnostics{{Pos: at(fields, "kind", docPos), Path: "kind", Message: "not a string", Expected: expect}}
		}
		k := unquote(lit.Value)
		if _, ok := spec.Lookup(k); !ok {
			return "", Diagnostics{{Pos: at(fields, "kind", docPos), Path: "kind", Message: fmt.Sprintf("unknown kind %q", k), Expected: expect}}
		}
		return k, nil
	}
	return "", Diagnostics{{Pos: docPos, Path: "kind", Message: "missing field", Expected: expect}}
}

// full validates a whole document against its kind's schema and returns its
// JSON with defaults applied, or every error it has.
func (l *Loader) full(kind, path string, n ast.Node, fields []spec.FieldPos, docPos spec.Pos) ([]byte, Diagnostics) {
	plainNumbers(n)
	v := l.build(n, path)
	if err := v.Err(); err != nil {
		return nil, fromCUE(err, path, fields, cue.Value{}, userValues(n), l.lineBase)
	}
	def := l.defs[kind]
	u := def.Unify(v)
	if err := u.Validate(cue.Concrete(true)); err != nil {
		values := userValues(n) // before unmask cuts fields out
		return nil, fromCUE(l.unmask(def, n, path, err), path, fields, def, values, l.lineBase)
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, Diagnostics{{Pos: docPos, Message: "encoding: " + err.Error()}}
	}
	return b, nil
}

// unmask finds the errors a failed document hides. CUE's evaluator reports
// some failures of a struct and skips others (a wrong value hides an unknown
// field beside it), so the fields that failed are cut from the syntax tree
// and the document is checked again, a few rounds at most; errors about the
// cut fields themselves are dropped. Only failing documents pay for this.
func (l *Loader) unmask(def cue.Value, n ast.Node, path string, err error) error {
	all := err
	cut := map[string]bool{}
	for round := 0; round < 16; round++ {
		before := len(cut)
		for _, e := range cueerrors.Errors(err) {
			// A check on a hidden field (_limit) is cut through the field
			// the user wrote (limit).
			p, _ := hiddenField(e.Path())
			if p != "" && deleteField(n, strings.Split(p, ".")) {
				cut[p] = true
			}
		}
		if len(cut) == before {
			return all
		}
		v := l.build(n, path)
		if v.Err() != nil {
			return all
		}
		err = def.Unify(v).Validate(cue.Concrete(true))
		if err == nil {
			return all
		}
		var fresh error
		for _, e := range cueerrors.Errors(err) {
			p, _ := hiddenField(e.Path())
			if underAny(p, cut) {
				continue
			}
			fresh = joinErr(fresh, e)
		}
		if fresh == nil {
			return all
		}
		all = joinErr(all, fresh)
	}
	return all
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return cueerrors.Append(cueerrors.Promote(a, ""), cueerrors.Promote(b, ""))
}

func underAny(p string, set map[string]bool) bool {
	for q := range set {
		if p == q || strings.HasPrefix(p, q+".") {
			return true
		}
	}
	return false
}

// deleteField removes the struct field at path from a syntax tree; list
// elements are never removed (that would renumber their siblings).
func deleteField(n ast.Node, path []string) bool {
	var decls *[]ast.Decl
	switch x := n.(type) {
	case *ast.File:
		decls = &x.Decls
	case *ast.StructLit:
		decls = &x.Elts
	case *ast.ListLit:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(x.Elts) || len(path) == 1 {
			return false
		}
		return deleteField(x.Elts[i], path[1:])
	default:
		return false
	}
	for i, d := range *decls {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name, _, err := ast.LabelName(f.Label)
		if err != nil || name != path[0] {
			continue
		}
		if len(path) == 1 {
			*decls = append((*decls)[:i:i], (*decls)[i+1:]...)
			return true
		}
		return deleteField(f.Value, path[1:])
	}
	return false
}

func (l *Loader) build(n ast.Node, path string) cue.Value {
	switch x := n.(type) {
	case *ast.File:
		return l.ctx.BuildFile(x, cue.Filename(path))
	case ast.Expr:
		return l.ctx.BuildExpr(x, cue.Filename(path))
	}
	return cue.Value{}
}

func unwrapPathError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// walk lists spec files under root in a stable order, for Load: a root that
// is a file is that one file.
func walk(root string) (files []string, isDir bool, diags Diagnostics) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, false, Diagnostics{{Pos: spec.Pos{File: root}, Message: "cannot read: " + unwrapPathError(err)}}
	}
	if !fi.IsDir() {
		return []string{root}, false, nil
	}
	t, err := walkDir(root)
	if err != nil {
		return nil, true, Diagnostics{{Pos: spec.Pos{File: root}, Message: "cannot resolve: " + unwrapPathError(err)}}
	}
	return t.Files, true, t.Diags
}

// Tree is what a walk of a spec directory found.
type Tree struct {
	// Files are the spec files the walk reads, sorted.
	Files []string
	// Dirs are the directories read, by the path the walk reached them
	// under (symlinks unresolved).
	Dirs []string
	// Reals are the resolved paths of the directories entered.
	Reals map[string]bool
	// Links are the symlinks followed, to a directory or a spec file.
	Links []Link
	// Diags say what was not read and why, each at its path: a spec file
	// path there exists but is refused, so its specs are not gone.
	Diags Diagnostics
}

// Link is a symlink the walk followed.
type Link struct {
	Path   string // as walked
	Target string // resolved, inside the spec directory
	Dir    bool
}

// Walk walks the spec directory root as Load does. The error is root's
// own (missing, not a directory, unresolvable); everything below it is
// reported in Tree.Diags.
func Walk(root string) (*Tree, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%q: not a directory", root)
	}
	return walkDir(root)
}

// walkDir walks a directory. Symlinks are followed, within the directory
// only; a directory reached twice (a loop) is reported, not entered. Hidden
// directories (.git, .setpoint) and cue.mod are skipped.
func walkDir(root string) (*Tree, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	t := &Tree{Reals: map[string]bool{}}
	seen := map[string]string{}
	tooMany := false
	var visit func(dir string)
	visit = func(dir string) {
		if tooMany {
			return
		}
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: dir}, Message: "cannot resolve: " + unwrapPathError(err)})
			return
		}
		if first, dup := seen[real]; dup {
			// Both are errors (the tree is not what its author meant), said
			// for what they are: a link back to a directory above it is a
			// loop; a second way to a directory reached already (a link to
			// a sibling) is an alias, whose specs are read once.
			if parent, err := filepath.EvalSymlinks(filepath.Dir(dir)); err == nil && confine.Within(real, parent) {
				t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: dir}, Message: fmt.Sprintf("symlink loop: it leads back to %s, a directory above it; not entered", first)})
				return
			}
			link, other := dir, first
			if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				link, other = first, dir
			}
			t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: link}, Message: fmt.Sprintf("a link to %s, a directory the walk reaches anyway: its specs are read once, from %s", other, first),
				Expected: "each directory reached one way (remove the link)"})
			return
		}
		if len(seen) >= MaxDirs {
			tooMany = true
			t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: root}, Message: fmt.Sprintf("more than %d directories; the rest are not read", MaxDirs), Expected: "a spec directory of at most load.MaxDirs directories"})
			return
		}
		seen[real] = dir
		t.Reals[real] = true
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: dir}, Message: "cannot read directory: " + unwrapPathError(err)})
			return
		}
		t.Dirs = append(t.Dirs, dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			en := ClassifyEntry(realRoot, p, e.Type())
			switch en.Kind {
			case EntryRefused:
				t.Diags = append(t.Diags, en.Diag)
			case EntryDir:
				if SkipDir(e.Name()) {
					continue
				}
				if en.Target != "" {
					t.Links = append(t.Links, Link{Path: p, Target: en.Target, Dir: true})
				}
				visit(p)
			case EntrySpec:
				if len(t.Files) >= MaxFiles {
					tooMany = true
					t.Diags = append(t.Diags, Diagnostic{Pos: spec.Pos{File: root}, Message: fmt.Sprintf("more than %d spec files; the rest are not read", MaxFiles), Expected: "a spec directory of at most load.MaxFiles files"})
					return
				}
				t.Files = append(t.Files, p)
				if en.Target != "" {
					t.Links = append(t.Links, Link{Path: p, Target: en.Target})
				}
			}
		}
	}
	visit(root)
	sort.Strings(t.Files)
	return t, nil
}

// EntryKind is what the walk makes of one directory entry.
type EntryKind int

// The kinds of entry.
const (
	// EntryOther is not read and not reported: not named like a spec
	// file.
	EntryOther EntryKind = iota
	// EntryDir is a directory (or a symlink to one inside the spec
	// directory): walked unless SkipDir.
	EntryDir
	// EntrySpec is a spec file the walk reads: a regular file, or a
	// symlink to one inside the spec directory.
	EntrySpec
	// EntryRefused is named like a spec file (or is a symlink to a
	// directory) but cannot be read; Entry.Diag says why. Its path exists:
	// it is broken, never taken for deleted.
	EntryRefused
)

// Entry is one directory entry as the walk judges it.
type Entry struct {
	Kind EntryKind
	// Target is where a symlink followed leads (resolved); "" for an entry
	// that is not a symlink.
	Target string
	Diag   Diagnostic // EntryRefused's
}

// specExpected is what a spec file path must hold.
const specExpected = "a regular file, or a symlink to one inside the spec directory"

// ClassifyEntry judges the entry p of a directory the walk reads, of type
// typ as the listing gives it (a symlink's own), under the spec directory
// resolved to realRoot. The walk and the watcher both judge by it, so that
// a spec file the one refuses the other does not take for deleted.
func ClassifyEntry(realRoot, p string, typ fs.FileMode) Entry {
	name := filepath.Base(p)
	refuse := func(msg, expected string) Entry {
		return Entry{Kind: EntryRefused, Diag: Diagnostic{Pos: spec.Pos{File: p}, Message: msg, Expected: expected}}
	}
	var target string
	if typ&os.ModeSymlink != 0 {
		st, err := os.Stat(p)
		if err != nil {
			if !IsSpecFile(name) {
				return Entry{}
			}
			msg := "cannot follow symlink: " + unwrapPathError(err)
			if errors.Is(err, syscall.ELOOP) {
				msg += " (a symlink loop)"
			}
			return refuse(msg+fmt.Sprintf("; %q is not read", name), specExpected)
		}
		// A link is followed only within the spec directory: specs arrive
		// in pull requests, and a link to /etc or / must not make setpoint
		// read (and quote) what is there.
		t, err := filepath.EvalSymlinks(p)
		if err != nil || !confine.Within(realRoot, t) {
			switch {
			case IsSpecFile(name) && !st.IsDir():
				return refuse(fmt.Sprintf("symlink leads outside the spec directory; not followed, %q is not read", name), specExpected)
			case st.IsDir() || IsSpecFile(name):
				return refuse("symlink leads outside the spec directory; not followed", "a directory inside the spec directory")
			}
			return Entry{}
		}
		typ, target = st.Mode().Type(), t
	}
	switch {
	case typ.IsDir():
		return Entry{Kind: EntryDir, Target: target}
	case !IsSpecFile(name):
		return Entry{}
	case typ.IsRegular():
		return Entry{Kind: EntrySpec, Target: target}
	}
	// A FIFO would hang the reader, a device could be read for ever: named
	// like a spec file, it is refused and said, never skipped unsaid.
	return refuse(fmt.Sprintf("%q is %s, not a regular file; not read", name, confine.Kind(typ)), specExpected)
}

// IsSpecFile reports whether a file of this name (a base name or a path) is
// a spec file: YAML (.yaml, .yml) or CUE (.cue), not hidden. It is the one
// definition: the loader's walk and the watcher both use it.
func IsSpecFile(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch filepath.Ext(base) {
	case ".yaml", ".yml", ".cue":
		return true
	}
	return false
}

// SkipDir reports whether a directory of this name (a base name or a path)
// below the spec directory is skipped: hidden ones (.git, .setpoint) and
// cue.mod. The spec directory itself is never skipped.
func SkipDir(name string) bool {
	base := filepath.Base(name)
	if base == "." || base == ".." {
		return false
	}
	return strings.HasPrefix(base, ".") || base == "cue.mod"
}
