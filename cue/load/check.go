package load

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// MaxDepth bounds how deeply a document's mappings and lists may nest. A
// spec needs about ten levels; CUE takes seconds to evaluate thousands, and
// YAML allows 10,000, so a 20 KB file of brackets would cost a validate run
// that much per document.
const MaxDepth = 100

// MaxMessage bounds a diagnostic's message and its expected part, in
// characters: an error is one line a person reads, whatever the input.
const MaxMessage = 300

// doc checks what the schema cannot see in a document's syntax (a key given
// twice in YAML, too deep a nesting), then validates and decodes it. Its
// diagnostics name the spec they belong to when its syntax does, so that a
// broken document is still known for what it is (an Environment that
// exists but is invalid).
func (l *Loader) doc(path string, n ast.Node, emit func(spec.Document)) Diagnostics {
	ds := l.syntaxChecks(path, n, !strings.HasSuffix(path, ".cue"))
	if ds == nil {
		ds = l.document(path, n, emit)
	}
	if len(ds) == 0 {
		return nil
	}
	if id := syntacticID(n); id != "" {
		for i := range ds {
			if ds[i].Spec == "" {
				ds[i].Spec = id
			}
		}
	}
	return ds
}

var (
	_ = spec.RegisterCheck(spec.Check{What: "no key twice in a YAML mapping, no nesting deeper than 100 levels", Why: spec.WhySyntax})
	_ = spec.RegisterCheck(spec.Check{What: "YAML aliases expand to at most 50,000 nodes (the decoder both tools share refuses an alias bomb)", Why: spec.WhySyntax, Example: "invalid/alias-bomb.yaml"})
)

// syntaxChecks walks a document once for duplicate keys (YAML only: in CUE
// a field given twice is unified, by design) and for nesting deeper than
// MaxDepth. A duplicate key would otherwise reach the schema as two values
// of one field and read as a conflict between them.
func (l *Loader) syntaxChecks(path string, n ast.Node, dupKeys bool) Diagnostics {
	var out Diagnostics
	pos := func(p token.Pos) spec.Pos {
		q := posOf(p, path)
		if q.Line > 0 {
			q.Line += l.lineBase
		}
		return q
	}
	// Too deep a nesting is reported at the field, at most two levels
	// down, that holds it: the path to the bracket that goes too deep
	// would be longer than the message.
	var anchor struct {
		path string
		pos  token.Pos
	}
	var walk func(prefix string, n ast.Node, depth int) bool
	fields := func(prefix string, decls []ast.Decl, depth int) bool {
		type seen struct {
			name string
			pos  token.Pos
		}
		var names []seen
		for _, d := range decls {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				continue
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			if dupKeys {
				dup := false
				for _, s := range names {
					if s.name == name {
						out = append(out, Diagnostic{Pos: pos(f.Label.Pos()), Path: p,
							Message:  fmt.Sprintf("duplicate key %s (first at line %d)", name, pos(s.pos).Line),
							Expected: "each key once per mapping"})
						dup = true
						break
					}
				}
				if dup {
					continue
				}
				names = append(names, seen{name, f.Label.Pos()})
			}
			if depth <= 1 {
				anchor.path, anchor.pos = p, f.Label.Pos()
			}
			if walk(p, f.Value, depth+1) {
				return true
			}
		}
		return false
	}
	walk = func(prefix string, n ast.Node, depth int) bool {
		switch x := n.(type) {
		case *ast.File:
			return fields(prefix, x.Decls, depth)
		case *ast.StructLit:
			if depth > MaxDepth {
				break
			}
			return fields(prefix, x.Elts, depth)
		case *ast.ListLit:
			if depth > MaxDepth {
				break
			}
			for i, el := range x.Elts {
				p := strings.TrimPrefix(prefix+"."+strconv.Itoa(i), ".")
				if walk(p, el, depth+1) {
					return true
				}
			}
			return false
		default:
			return false
		}
		out = append(out, Diagnostic{Pos: pos(anchor.pos), Path: anchor.path,
			Message:  fmt.Sprintf("nested more than %d levels deep", MaxDepth),
			Expected: "a shallower document"})
		return true
	}
	walk("", n, 0)
	return out
}

// syntacticID is the kind/namespace/name a document's syntax gives, or ""
// when it names no kind: what a diagnostic's Spec says about a document
// that did not decode.
func syntacticID(n ast.Node) string {
	str := func(decls []ast.Decl, key string) (string, ast.Expr) {
		for _, d := range decls {
			f, ok := d.(*ast.Field)
			if !ok {
				continue
			}
			if name, _, err := ast.LabelName(f.Label); err != nil || name != key {
				continue
			}
			if lit, ok := f.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				return unquote(lit.Value), f.Value
			}
			return "", f.Value
		}
		return "", nil
	}
	var decls []ast.Decl
	switch x := n.(type) {
	case *ast.File:
		decls = x.Decls
	case *ast.StructLit:
		decls = x.Elts
	}
	kind, _ := str(decls, "kind")
	if kind == "" {
		return ""
	}
	ns, name := "default", ""
	if _, meta := str(decls, "metadata"); meta != nil {
		if m, ok := meta.(*ast.StructLit); ok {
			name, _ = str(m.Elts, "name")
			if s, _ := str(m.Elts, "namespace"); s != "" {
				ns = s
			}
		}
	}
	return kind + "/" + ns + "/" + name
}

// invalidKind reports whether a document of kind was found but failed:
// its diagnostics name it (see doc).
func invalidKind(ds Diagnostics, kind string) bool {
	for _, d := range ds {
		if strings.HasPrefix(d.Spec, kind+"/") {
			return true
		}
	}
	return false
}

// fieldMessage is a Go-side rule's message, with where the earlier field it
// refers to is.
func fieldMessage(fe spec.FieldError, fields []spec.FieldPos, docPos spec.Pos) string {
	if fe.Related == "" {
		return fe.Message
	}
	return fmt.Sprintf("%s (first at line %d)", fe.Message, at(fields, fe.Related, docPos).Line)
}

// decodeError places an error of decoding a validated document into its Go
// type (a quantity too large for the type, a CPU quantity below 1m: what
// the schema's patterns let through) at the field it comes from. The JSON
// is decoded again field by field until the failing one is found; only a
// failing document pays for this.
func decodeError(canon []byte, doc spec.Document, err error, fields []spec.FieldPos, docPos spec.Pos) Diagnostic {
	path, leaf := locateDecodeError(canon, reflect.TypeOf(doc))
	if leaf == nil {
		leaf = err
	}
	msg, expected := leaf.Error(), ""
	// Scalar types say what they want as "... (expected ...)".
	if i := strings.LastIndex(msg, " (expected "); i >= 0 && strings.HasSuffix(msg, ")") {
		msg, expected = msg[:i], strings.TrimSuffix(msg[i+len(" (expected "):], ")")
	}
	return Diagnostic{Pos: at(fields, path, docPos), Path: path, Message: msg, Expected: expected}
}

// locateDecodeError returns the dotted path of the field of data that does
// not decode into t, and its error; "" and nil when data decodes.
func locateDecodeError(data []byte, t reflect.Type) (string, error) {
	err := json.Unmarshal(data, reflect.New(t).Interface())
	if err == nil {
		return "", nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	join := func(a, b string) string {
		if b == "" {
			return a
		}
		return a + "." + b
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return "", err
		}
		for name, ft := range jsonFieldTypes(t) {
			raw, ok := m[name]
			if !ok {
				continue
			}
			if p, e := locateDecodeError(raw, ft); e != nil {
				return join(name, p), e
			}
		}
	case reflect.Slice:
		var elems []json.RawMessage
		if t.Elem().Kind() == reflect.Uint8 || json.Unmarshal(data, &elems) != nil {
			return "", err
		}
		for i, raw := range elems {
			if p, e := locateDecodeError(raw, t.Elem()); e != nil {
				return join(strconv.Itoa(i), p), e
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			return "", err
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p, e := locateDecodeError(m[k], t.Elem()); e != nil {
				return join(k, p), e
			}
		}
	}
	return "", err
}

// jsonFieldTypes maps the JSON names of a struct's fields to their types,
// with embedded structs' fields promoted as encoding/json does.
func jsonFieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFieldTypes(f.Type) {
				out[k] = v
			}
			continue
		}
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// boundMessages cuts every message and expected part to MaxMessage
// characters, on a character boundary, with an ellipsis.
func boundMessages(ds Diagnostics) {
	for i := range ds {
		ds[i].Message = bound(ds[i].Message)
		ds[i].Expected = bound(ds[i].Expected)
	}
}

func bound(s string) string {
	if utf8.RuneCountInString(s) <= MaxMessage {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxMessage-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Summary is the last line `setpoint validate` prints: "3 documents in 2
// files are valid", or "1 error; 0 valid documents in 1 file".
func (r *Result) Summary() string {
	if len(r.Diags) == 0 {
		verb := "are"
		if len(r.Documents) == 1 {
			verb = "is"
		}
		return fmt.Sprintf("%s in %s %s valid", CountNoun(len(r.Documents), "document"), CountNoun(r.Files, "file"), verb)
	}
	// A document can pass its schema and still be in error (a duplicate
	// across files): the count says which documents were read, not which
	// are free of errors.
	verb := "pass their schemas"
	if len(r.Documents) == 1 {
		verb = "passes its schema"
	}
	return fmt.Sprintf("%s; %s in %s %s", CountNoun(len(r.Diags), "error"), CountNoun(len(r.Documents), "document"), CountNoun(r.Files, "file"), verb)
}

// CountNoun says "1 error", "2 errors", "0 errors"; noun is singular and
// takes an "s".
func CountNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
