package load

import (
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// The fast path validates a YAML document section by section: metadata and
// each field of spec are unified with their own schema, and the result of
// each is kept by the section's content, so the sections that repeat across
// a directory (enforcement, safety, memory settings) are evaluated once.
// Sections absent from the document take their schema defaults, computed
// once per kind. This is sound because no section of a kind's schema refers
// to another (TestFastPathMatchesFullPath checks the two paths agree).
// Anything the fast path does not recognise, and every invalid section,
// falls back to the full path, which alone reports errors, so diagnostics
// are the same either way.

// kindSections is the precomputed schema of one kind, split by section.
type kindSections struct {
	apiVersion string
	metadata   cue.Value
	spec       map[string]section
	order      []string // spec sections in schema order
}

type section struct {
	def      cue.Value
	optional bool
	// identity sections (metadata, target) differ in every document by
	// construction; caching them would only cost memory.
	identity bool
	// deflt is the JSON of the section when absent: its defaults, or nil
	// when an absent section is omitted (optional) or an error (required).
	deflt []byte
}

const maxCache = 200_000

func (l *Loader) prepareSections(kind string, def cue.Value) {
	ks := &kindSections{spec: map[string]section{}}
	ks.apiVersion, _ = def.LookupPath(cue.MakePath(cue.Str("apiVersion"))).String()
	ks.metadata = def.LookupPath(cue.MakePath(cue.Str("metadata")))
	specDef := def.LookupPath(cue.MakePath(cue.Str("spec")))
	it, err := specDef.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		s := section{def: it.Value(), optional: it.IsOptional(), identity: name == "target"}
		if !s.optional && s.def.Validate(cue.Concrete(true)) == nil {
			if b, err := s.def.MarshalJSON(); err == nil {
				s.deflt = b
			}
		}
		ks.spec[name] = s
		ks.order = append(ks.order, name)
	}
	l.sections[kind] = ks
}

// fast returns the document's JSON with defaults applied, or false when the
// full path must decide.
func (l *Loader) fast(kind string, n ast.Node) ([]byte, bool) {
	ks := l.sections[kind]
	doc, ok := n.(*ast.StructLit)
	if !ok || ks == nil {
		return nil, false
	}
	var meta, specLit ast.Expr
	seen := map[string]bool{}
	for _, d := range doc.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			return nil, false
		}
		name, _, err := ast.LabelName(f.Label)
		if err != nil || seen[name] {
			// A key given twice unifies both values: the full path decides.
			return nil, false
		}
		seen[name] = true
		switch name {
		case "apiVersion":
			if lit, ok := f.Value.(*ast.BasicLit); !ok || lit.Kind != token.STRING || unquote(lit.Value) != ks.apiVersion {
				return nil, false
			}
		case "kind":
			if lit, ok := f.Value.(*ast.BasicLit); !ok || lit.Kind != token.STRING || unquote(lit.Value) != kind {
				return nil, false
			}
		case "metadata":
			meta = f.Value
		case "spec":
			specLit = f.Value
		default:
			return nil, false
		}
	}
	if len(seen) != 4 || meta == nil || specLit == nil {
		return nil, false
	}
	sl, ok := specLit.(*ast.StructLit)
	if !ok {
		return nil, false
	}
	metaJSON, ok := l.section(kind, "metadata", section{def: ks.metadata, identity: true}, meta)
	if !ok {
		return nil, false
	}
	given := make(map[string]ast.Expr, len(sl.Elts))
	for _, d := range sl.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			return nil, false
		}
		name, _, err := ast.LabelName(f.Label)
		if _, known := ks.spec[name]; err != nil || !known {
			return nil, false
		}
		if _, dup := given[name]; dup {
			return nil, false
		}
		given[name] = f.Value
	}
	out := make([]byte, 0, 512)
	out = append(out, `{"apiVersion":`...)
	out = strconv.AppendQuote(out, ks.apiVersion)
	out = append(out, `,"kind":`...)
	out = strconv.AppendQuote(out, kind)
	out = append(out, `,"metadata":`...)
	out = append(out, metaJSON...)
	out = append(out, `,"spec":{`...)
	first := true
	for _, name := range ks.order {
		s := ks.spec[name]
		var b []byte
		if e, ok := given[name]; ok {
			if b, ok = l.section(kind, name, s, e); !ok {
				return nil, false
			}
		} else if s.deflt != nil {
			b = s.deflt
		} else if s.optional {
			continue
		} else {
			return nil, false // a required section is missing
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = strconv.AppendQuote(out, name)
		out = append(out, ':')
		out = append(out, b...)
	}
	out = append(out, "}}"...)
	return out, true
}

// section validates one section against its schema, through the cache.
func (l *Loader) section(kind, name string, s section, e ast.Expr) ([]byte, bool) {
	if s.identity {
		return l.evalSection(s.def, e)
	}
	var key strings.Builder
	key.WriteString(kind)
	key.WriteByte(0)
	key.WriteString(name)
	key.WriteByte(0)
	if !canon(&key, e) {
		return nil, false
	}
	k := key.String()
	if b, ok := l.cache[k]; ok {
		return b, true
	}
	b, ok := l.evalSection(s.def, e)
	if !ok {
		return nil, false
	}
	if len(l.cache) >= maxCache {
		clear(l.cache)
	}
	l.cache[k] = b
	return b, true
}

// canon writes a canonical form of a YAML-derived expression: equal forms
// mean equal values. It refuses anything but plain data.
func canon(b *strings.Builder, e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.BasicLit:
		b.WriteString(x.Kind.String())
		b.WriteByte(' ')
		b.WriteString(x.Value)
		b.WriteByte(';')
	case *ast.Ident:
		b.WriteString("id ")
		b.WriteString(x.Name)
		b.WriteByte(';')
	case *ast.UnaryExpr:
		b.WriteString(x.Op.String())
		return canon(b, x.X)
	case *ast.ListLit:
		b.WriteByte('[')
		for _, el := range x.Elts {
			if !canon(b, el) {
				return false
			}
		}
		b.WriteByte(']')
	case *ast.StructLit:
		b.WriteByte('{')
		for _, d := range x.Elts {
			f, ok := d.(*ast.Field)
			if !ok {
				return false
			}
			name, _, err := ast.LabelName(f.Label)
			if err != nil {
				return false
			}
			b.WriteString(strconv.Quote(name))
			b.WriteByte(':')
			if !canon(b, f.Value) {
				return false
			}
		}
		b.WriteByte('}')
	default:
		return false
	}
	return true
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func (l *Loader) evalSection(def cue.Value, e ast.Expr) ([]byte, bool) {
	v := l.ctx.BuildExpr(e)
	if v.Err() != nil {
		return nil, false
	}
	u := def.Unify(v)
	if u.Validate(cue.Concrete(true)) != nil {
		return nil, false
	}
	b, err := u.MarshalJSON()
	return b, err == nil
}
