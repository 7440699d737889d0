package load

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueformat "cuelang.org/go/cue/format"
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
	metadata   section
	spec       map[string]section
	order      []string // spec sections in schema order
}

type section struct {
	def      cue.Value
	optional bool
	// leaves are the section's fields checked outside CUE (idcheck.go).
	leaves []leaf
	// minItems is a list section's least length, which the spec's schema
	// states beside it (_providers: providers & list.MinItems(1)).
	minItems int
	// deflt is the JSON of the section when absent: its defaults, or nil
	// when an absent section is omitted (optional) or an error (required).
	deflt []byte
}

const maxCache = 200_000

// prepareSections splits a kind's schema by section (nil: the kind is not
// on the fast path).
func (l *Loader) prepareSections(kind string, def cue.Value) *kindSections {
	ks := &kindSections{spec: map[string]section{}}
	ks.apiVersion, _ = def.LookupPath(cue.MakePath(cue.Str("apiVersion"))).String()
	meta := def.LookupPath(cue.MakePath(cue.Str("metadata")))
	ks.metadata = section{def: meta, leaves: l.leaves(meta)}
	specDef := def.LookupPath(cue.MakePath(cue.Str("spec")))
	it, err := specDef.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		s := section{def: it.Value(), optional: it.IsOptional(), leaves: l.leaves(it.Value())}
		if !s.optional && s.def.Validate(cue.Concrete(true)) == nil {
			if b, err := s.def.MarshalJSON(); err == nil {
				s.deflt = b
			}
		}
		ks.spec[name] = s
		ks.order = append(ks.order, name)
	}
	// A hidden field of the spec constrains a section from beside it: the
	// fast path knows one form, a least length; any other leaves the kind
	// to the full path.
	hidden, err := specDef.Fields(cue.Hidden(true), cue.Optional(true))
	if err != nil {
		return nil
	}
	for hidden.Next() {
		if !strings.HasPrefix(hidden.Selector().String(), "_") {
			continue
		}
		name, n, ok := minItemsOf(hidden.Value())
		s, known := ks.spec[name]
		if !ok || !known {
			return nil
		}
		s.minItems = n
		ks.spec[name] = s
	}
	if kind == "Environment" {
		l.providerDef = section{def: ks.spec["providers"].def}
		w := l.schema.LookupPath(cue.MakePath(cue.Def("SimWorkload")))
		if w.Exists() && l.simWorkloadsSplit() {
			l.simWorkload = section{def: w, leaves: l.leaves(w)}
		}
	}
	return ks
}

// simWorkloadsSplit says whether #SimConfig asks of its workloads only
// what the split checks: that each is a #SimWorkload, and that there is
// one. Read from its source: a bound added there (list.MaxItems) turns
// the split off rather than be skipped.
func (l *Loader) simWorkloadsSplit() bool {
	n := l.schema.LookupPath(cue.MakePath(cue.Def("SimConfig"))).Source()
	f, ok := n.(*ast.Field)
	if !ok {
		return false
	}
	body, ok := f.Value.(*ast.StructLit)
	if !ok {
		return false
	}
	mentions, found := 0, 0
	for _, d := range body.Elts {
		fd, ok := d.(*ast.Field)
		if !ok {
			if c, ok := d.(*ast.Comprehension); ok && strings.Contains(format(c), "workloads") {
				return false
			}
			continue
		}
		text := format(fd)
		if !strings.Contains(text, "workloads") {
			continue
		}
		mentions++
		switch text {
		case "workloads: [...#SimWorkload]", "_workloads: workloads & list.MinItems(1)":
			found++
		}
	}
	return mentions == 2 && found == 2
}

// format prints a node of the schema's source on one line, without its
// comments.
func format(n ast.Node) string {
	b, err := cueformat.Node(n)
	if err != nil {
		return ""
	}
	var code []string
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		code = append(code, line)
	}
	return strings.Join(strings.Fields(strings.Join(code, " ")), " ")
}

// minItemsOf reads a hidden constraint of the form X & list.MinItems(N),
// X a field beside it.
func minItemsOf(v cue.Value) (field string, n int, ok bool) {
	op, args := v.Expr()
	if op != cue.AndOp || len(args) != 2 {
		return "", 0, false
	}
	sop, sargs := args[0].Expr()
	cop, cargs := args[1].Expr()
	if sop != cue.SelectorOp || len(sargs) != 2 || cop != cue.CallOp || len(cargs) != 2 || fmt.Sprint(cargs[0]) != "list.MinItems" {
		return "", 0, false
	}
	field, err := sargs[1].String()
	if err != nil {
		return "", 0, false
	}
	m, err := cargs[1].Int64()
	if err != nil || m < 0 || m > 1<<20 {
		return "", 0, false
	}
	return field, int(m), true
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
	metaJSON, ok := l.section(kind, "metadata", ks.metadata, meta)
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
			if list, isList := e.(*ast.ListLit); s.minItems > 0 && (!isList || len(list.Elts) < s.minItems) {
				return nil, false
			}
			if kind == "Environment" && name == "providers" {
				b, ok = l.providers(s, e)
			} else {
				b, ok = l.section(kind, name, s, e)
			}
			if !ok {
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
	l.counts.fast++
	return out, true
}

// section validates one section against its schema, through the cache.
// Its leaves are checked on their own and put into the JSON of the
// section as validated with placeholders.
func (l *Loader) section(kind, name string, s section, e ast.Expr) ([]byte, bool) {
	var key strings.Builder
	key.WriteString(kind)
	key.WriteByte(0)
	key.WriteString(name)
	key.WriteByte(0)
	var given []string // each leaf's JSON, in s.leaves' order ("": not templated)
	validate := e
	if sl, ok := e.(*ast.StructLit); ok && len(s.leaves) > 0 {
		given = make([]string, len(s.leaves))
		var ok bool
		if validate, ok = templated(&key, sl, s.leaves, given); !ok {
			return nil, false
		}
	} else if !canon(&key, e) {
		return nil, false
	}
	k := key.String()
	b, hit := l.cache[k]
	if !hit {
		var ok bool
		if b, ok = l.evalSection(s.def, validate); !ok {
			return nil, false
		}
		if len(l.cache) >= maxCache {
			clear(l.cache)
		}
		l.cache[k] = b
	}
	for i, v := range given {
		if v == "" {
			continue
		}
		var ok bool
		if b, ok = replaceLeaf(b, s.leaves[i], v); !ok {
			return nil, false
		}
		l.counts.leaves++
	}
	return b, true
}

// replaceLeaf puts a leaf's JSON in its placeholder's place in a section's
// JSON: a field's value, found whole (a number between its colon and the
// comma or brace after it), and only once.
func replaceLeaf(b []byte, lf leaf, js string) ([]byte, bool) {
	at := -1
	for _, end := range []string{",", "}"} {
		pat := []byte(":" + lf.placeholder + end)
		n := bytes.Count(b, pat)
		if n > 1 || (n == 1 && at >= 0) {
			return nil, false
		}
		if n == 1 {
			at = bytes.Index(b, pat) + 1
		}
	}
	if at < 0 {
		return nil, false
	}
	return slices.Concat(b[:at], []byte(js), b[at+len(lf.placeholder):]), true
}

// templated writes the canonical form of a struct section with each leaf's
// literal replaced by its placeholder, checks the literals (their JSON into
// given), and returns the section to validate: the same with the
// placeholders. It refuses what canon refuses, a literal holding a
// placeholder, and a leaf its check finds invalid (the full path then
// reports it); a leaf the check is not sure of stays in place, for CUE.
func templated(key *strings.Builder, sl *ast.StructLit, leaves []leaf, given []string) (ast.Expr, bool) {
	out := &ast.StructLit{Elts: make([]ast.Decl, len(sl.Elts))}
	key.WriteByte('{')
	var rest strings.Builder // the canonical form of what is not templated
	for i, d := range sl.Elts {
		out.Elts[i] = d
		f, ok := d.(*ast.Field)
		if !ok {
			return nil, false
		}
		name, _, err := ast.LabelName(f.Label)
		if err != nil {
			return nil, false
		}
		key.WriteString(strconv.Quote(name))
		key.WriteByte(':')
		id := slices.IndexFunc(leaves, func(x leaf) bool { return x.name == name })
		if id >= 0 && given[id] == "" {
			js, valid, sure := leaves[id].check(f.Value)
			if sure && !valid {
				return nil, false
			}
			if sure {
				given[id] = js
				ph := &ast.BasicLit{Kind: leaves[id].kind, Value: leaves[id].placeholder}
				ast.SetPos(ph, f.Value.Pos())
				out.Elts[i] = &ast.Field{Label: f.Label, Value: ph}
				key.WriteString("leaf;")
				continue
			}
		}
		start := rest.Len()
		if !canon(&rest, f.Value) {
			return nil, false
		}
		key.WriteString(rest.String()[start:])
	}
	key.WriteByte('}')
	for _, lf := range leaves {
		// A string equal to a placeholder elsewhere in the section would
		// be taken for the leaf's in its JSON (a number is found by its
		// place).
		if !lf.num && strings.Contains(rest.String(), lf.placeholder) {
			return nil, false
		}
	}
	return out, true
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

// providers validates an Environment's providers. A sim provider's
// workloads (a directory of many services lists thousands) are validated
// one by one against #SimWorkload, through the cache with their names and
// namespaces as identities, and the provider itself with its first
// workload only: #SimConfig asks of its workloads only that each is a
// #SimWorkload and that there is one (TestFastPathMatchesFullPath holds
// the split to the whole).
func (l *Loader) providers(s section, e ast.Expr) ([]byte, bool) {
	list, ok := e.(*ast.ListLit)
	if !ok || l.simWorkload.def == (cue.Value{}) {
		return l.section("Environment", "providers", s, e)
	}
	out := []byte{'['}
	for i, el := range list.Elts {
		b, ok := l.provider(el)
		if !ok {
			return nil, false
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']'), true
}

// provider validates one element of an Environment's providers.
func (l *Loader) provider(el ast.Expr) ([]byte, bool) {
	one := func(e ast.Expr) ([]byte, bool) {
		return l.section("Environment", "providers", l.providerDef, &ast.ListLit{Elts: []ast.Expr{e}})
	}
	unwrap := func(b []byte, ok bool) ([]byte, bool) {
		if !ok || len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
			return nil, false
		}
		return b[1 : len(b)-1], true
	}
	sl, ok := el.(*ast.StructLit)
	if !ok {
		return unwrap(one(el))
	}
	var config *ast.StructLit
	var workloads *ast.ListLit
	sim := false
	for _, d := range sl.Elts {
		f, ok := d.(*ast.Field)
		if !ok {
			return unwrap(one(el))
		}
		name, _, _ := ast.LabelName(f.Label)
		switch name {
		case "name":
			lit, ok := f.Value.(*ast.BasicLit)
			sim = ok && lit.Kind == token.STRING && unquote(lit.Value) == "sim"
		case "config":
			config, _ = f.Value.(*ast.StructLit)
		}
	}
	if config != nil {
		for _, d := range config.Elts {
			if f, ok := d.(*ast.Field); ok {
				if name, _, _ := ast.LabelName(f.Label); name == "workloads" {
					workloads, _ = f.Value.(*ast.ListLit)
				}
			}
		}
	}
	if !sim || workloads == nil || len(workloads.Elts) < 2 {
		return unwrap(one(el))
	}
	var ws, first []byte
	for i, w := range workloads.Elts {
		b, ok := l.section("Environment", "providers.sim.workloads", l.simWorkload, w)
		if !ok {
			return nil, false
		}
		if i > 0 {
			ws = append(ws, ',')
		} else {
			first = b
		}
		ws = append(ws, b...)
	}
	// The provider with its first workload alone, then all of them in
	// its place (found by the first's JSON, which is the same there).
	short := &ast.StructLit{Elts: slices.Clone(sl.Elts)}
	for i, d := range short.Elts {
		f := d.(*ast.Field)
		if name, _, _ := ast.LabelName(f.Label); name != "config" {
			continue
		}
		c := &ast.StructLit{Elts: slices.Clone(config.Elts)}
		for j, cd := range c.Elts {
			cf, ok := cd.(*ast.Field)
			if !ok {
				continue
			}
			if name, _, _ := ast.LabelName(cf.Label); name == "workloads" {
				c.Elts[j] = &ast.Field{Label: cf.Label, Value: &ast.ListLit{Elts: workloads.Elts[:1]}}
			}
		}
		short.Elts[i] = &ast.Field{Label: f.Label, Value: c}
	}
	b, ok := unwrap(one(short))
	if !ok {
		return nil, false
	}
	one1 := slices.Concat([]byte(`"workloads":[`), first, []byte{']'})
	if bytes.Count(b, one1) != 1 {
		return nil, false
	}
	l.counts.splits++
	return bytes.Replace(b, one1, slices.Concat([]byte(`"workloads":[`), ws, []byte{']'}), 1), true
}
