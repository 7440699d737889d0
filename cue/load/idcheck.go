package load

import (
	"fmt"
	"regexp"
	"unicode/utf8"

	"cuelang.org/go/cue"
)

// Identity fields (a name, a namespace) differ in every document, so a
// section holding one would never be found in the fast path's cache. Such
// a section is validated and cached with a placeholder in the field's
// place, and the field's own string is checked by its constraint compiled
// to Go: the schema writes these as rune limits and regular expressions,
// which CUE checks with Go's own regexp package, so the two agree exactly
// (TestCompiledChecksAgreeWithCUE holds them to it). A constraint of any
// other form is not compiled, and its section is cached by its whole
// content as before.

// idField is an identity field of a section.
type idField struct {
	name string
	// placeholder stands in for the field's string while the section is
	// validated; it meets check, and no other string of a cached section
	// may contain idMark.
	placeholder string
	check       func(string) bool
}

// idMark starts every placeholder.
const idMark = "zz-setpoint-id-"

// identityNames are the fields taken for identities where a section's
// schema gives them a compilable string constraint.
var identityNames = []string{"name", "namespace"}

// idFields finds the identity fields of a struct section's schema.
func (l *Loader) idFields(def cue.Value) []idField {
	if def.IncompleteKind() != cue.StructKind {
		return nil
	}
	var out []idField
	for i, name := range identityNames {
		it, err := def.Fields(cue.Optional(true))
		if err != nil {
			return nil
		}
		for it.Next() {
			if it.Selector().Unquoted() != name {
				continue
			}
			check := l.compileString(it.Value(), 0)
			ph := fmt.Sprintf("%s%d", idMark, i)
			if check != nil && check(ph) {
				out = append(out, idField{name: name, placeholder: ph, check: check})
			}
		}
	}
	return out
}

// compileString compiles a string constraint of the forms the schema uses
// (a concrete string, =~ a regular expression, strings.MinRunes and
// MaxRunes, a reference to a definition of these, and & and | of them), or
// returns nil.
func (l *Loader) compileString(v cue.Value, depth int) func(string) bool {
	if depth > 8 {
		return nil
	}
	op, args := v.Expr()
	switch op {
	case cue.NoOp:
		if s, err := v.String(); err == nil && v.IsConcrete() {
			return func(x string) bool { return x == s }
		}
	case cue.OrOp, cue.AndOp:
		var parts []func(string) bool
		for _, a := range args {
			p := l.compileString(a, depth+1)
			if p == nil {
				return nil
			}
			parts = append(parts, p)
		}
		if op == cue.OrOp {
			return func(x string) bool {
				for _, p := range parts {
					if p(x) {
						return true
					}
				}
				return false
			}
		}
		return func(x string) bool {
			for _, p := range parts {
				if !p(x) {
					return false
				}
			}
			return true
		}
	case cue.RegexMatchOp:
		if len(args) != 1 {
			return nil
		}
		pat, err := args[0].String()
		if err != nil {
			return nil
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil
		}
		return re.MatchString
	case cue.CallOp:
		if len(args) != 2 {
			return nil
		}
		n, err := args[1].Int64()
		if err != nil {
			return nil
		}
		switch fmt.Sprint(args[0]) {
		case "strings.MaxRunes":
			return func(x string) bool { return utf8.RuneCountInString(x) <= int(n) }
		case "strings.MinRunes":
			return func(x string) bool { return utf8.RuneCountInString(x) >= int(n) }
		}
	case cue.SelectorOp:
		// A reference to one of the schema's definitions (#Name).
		if len(args) != 2 {
			return nil
		}
		name, err := args[1].String()
		if err != nil || len(name) < 2 || name[0] != '#' {
			return nil
		}
		d := l.schema.LookupPath(cue.MakePath(cue.Def(name)))
		if !d.Exists() {
			return nil
		}
		return l.compileString(d, depth+1)
	}
	return nil
}
