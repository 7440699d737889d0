package load

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// Leaves: a section's scalar fields (a name, a namespace, a target's
// rate, a duration) differ from document to document, so a section holding
// one would seldom be found in the fast path's cache. Such a section is
// validated and cached with a placeholder in each leaf's place, and the
// leaf's own literal is checked by its constraint compiled to Go, then put
// into the section's JSON in the placeholder's place. The schema writes
// these constraints as rune limits, regular expressions (which CUE checks
// with Go's own regexp package), number kinds and bounds (compared here as
// exact decimals, as CUE does): TestCompiledChecksAgreeWithCUE holds the
// two to each other. A constraint of any other form, a field another field
// refers to (max: >=min), and a literal the check cannot be sure of (a
// number written in another form than JSON's) are left to CUE.

// leaf is a scalar field of a section validated outside CUE.
type leaf struct {
	name string
	num  bool // a number, else a string
	// placeholder is the literal standing in for the field's while the
	// section is validated, as written in CUE and in JSON (a string's
	// quoted); it meets check, and no other literal of a section using it
	// may contain it.
	placeholder string
	kind        token.Token // the placeholder's: STRING, INT or FLOAT
	str         func(string) bool
	number      numCheck
}

// numCheck says whether a number literal meets a constraint, and whether it
// is sure (CUE's own kinds and decimals decide what it is not sure of).
type numCheck func(n numLit) (ok, sure bool)

// numLit is a number literal: its exact value and whether it is an int.
type numLit struct {
	r     *big.Rat
	isInt bool
}

// idMark starts every string placeholder.
const idMark = "zz-setpoint-id-"

// plainNumber is a number literal CUE's JSON writes the same way: no sign
// (CUE reads one), no exponent, no leading zero, and not below 1e-6 (which
// CUE writes with an exponent).
var plainNumber = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.[0-9]+)?$`)

// parseNum reads a CUE number literal written as CUE's JSON writes it;
// any other (1e3, 0x10, 1_000, 0.0000001) is CUE's to judge.
func parseNum(lit *ast.BasicLit) (numLit, bool) {
	if (lit.Kind != token.INT && lit.Kind != token.FLOAT) || len(lit.Value) > 40 || !plainNumber.MatchString(lit.Value) ||
		strings.HasPrefix(lit.Value, "0.000000") || (lit.Kind == token.INT) == strings.Contains(lit.Value, ".") {
		return numLit{}, false
	}
	r, ok := new(big.Rat).SetString(lit.Value)
	if !ok {
		return numLit{}, false
	}
	return numLit{r: r, isInt: lit.Kind == token.INT}, true
}

// leaves finds the leaves of a struct section's schema: its fields whose
// constraint compiles, which nothing in the section's source refers to
// (max: >=min, if default == "prometheus" {...}: the value of one field
// changes what another must be).
func (l *Loader) leaves(def cue.Value) []leaf {
	if def.IncompleteKind() != cue.StructKind {
		return nil
	}
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	used := map[string]bool{}
	if !l.refs(def.Source(), used, map[string]bool{}, 0) {
		return nil
	}
	var out []leaf
	for it.Next() {
		name := it.Selector().Unquoted()
		if used[name] {
			continue
		}
		v, i := it.Value(), len(out)
		switch v.IncompleteKind() {
		case cue.StringKind:
			check := compileString(v)
			if check == nil {
				continue
			}
			for _, ph := range []string{idMark + strconv.Itoa(i), "98765432" + strconv.Itoa(i) + "ms", "zz.setpoint.id." + strconv.Itoa(i)} {
				if check(ph) {
					out = append(out, leaf{name: name, placeholder: strconv.Quote(ph), kind: token.STRING, str: check})
					break
				}
			}
		case cue.NumberKind, cue.IntKind, cue.FloatKind:
			check := compileNumber(v)
			if check == nil {
				continue
			}
			for _, ph := range []string{strconv.Itoa(987654300 + i), strconv.Itoa(98700 + i), strconv.Itoa(9870 + i), strconv.Itoa(980 + i),
				fmt.Sprintf("987.654%d", i+1), fmt.Sprintf("98.7654%d", i+1), fmt.Sprintf("9.87654%d", i+1), fmt.Sprintf("0.987654%d", i+1)} {
				kind := token.INT
				if strings.Contains(ph, ".") {
					kind = token.FLOAT
				}
				n, _ := parseNum(&ast.BasicLit{Kind: kind, Value: ph})
				if ok, sure := check(n); ok && sure {
					out = append(out, leaf{name: name, num: true, placeholder: ph, kind: kind, number: check})
					break
				}
			}
		}
	}
	return out
}

// refs adds to used every identifier a schema's source uses other than as a
// label, through the definitions it names. It is false when a part has no
// source to read: then nothing can be said of what refers to what.
func (l *Loader) refs(n ast.Node, used, seen map[string]bool, depth int) bool {
	if n == nil || depth > 32 {
		return false
	}
	ok := true
	ast.Walk(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			switch x.Label.(type) {
			case *ast.Ident, *ast.BasicLit:
			case *ast.ListLit:
				// A pattern ([string]: v): its constraint is in every
				// matching field's value, as the leaves are compiled.
			default:
				// An alias (X=name: a reference to it names X) or a
				// dynamic label: what it names is not read here.
				ok = false
				return false
			}
			// The label names the field; its value is what may refer.
			ok = ok && l.refs(x.Value, used, seen, depth+1)
			return false
		case *ast.Comprehension:
			// What a comprehension sets depends on its clauses: every
			// field it names is as good as referred to.
			ast.Walk(x, func(n ast.Node) bool {
				switch y := n.(type) {
				case *ast.Ident:
					used[y.Name] = true
				case *ast.BasicLit:
					if y.Kind == token.STRING {
						if v, err := literal.Unquote(y.Value); err == nil {
							used[v] = true
						}
					}
				}
				return true
			}, nil)
		case *ast.Ident:
			used[x.Name] = true
			if strings.HasPrefix(x.Name, "#") && !seen[x.Name] {
				seen[x.Name] = true
				d := l.schema.LookupPath(cue.MakePath(cue.Def(x.Name)))
				ok = ok && d.Exists() && l.refs(d.Source(), used, seen, depth+1)
			}
		}
		return true
	}, nil)
	return ok
}

// check checks a literal against the leaf and returns the JSON it stands
// for. sure is false when the literal is not of the leaf's kind or the
// check cannot be sure of it (CUE then validates the field in place); ok
// false with sure is an invalid literal (the full path reports it).
func (lf leaf) check(e ast.Expr) (json string, ok, sure bool) {
	lit, isLit := e.(*ast.BasicLit)
	if !isLit {
		return "", false, false
	}
	if !lf.num {
		// A plain double-quoted string only: a bytes literal ('a', from
		// YAML's !!binary) or a multi-line one is CUE's to judge.
		if lit.Kind != token.STRING || !strings.HasPrefix(lit.Value, `"`) || strings.HasPrefix(lit.Value, `"""`) {
			return "", false, false
		}
		v, err := literal.Unquote(lit.Value)
		if err != nil || !utf8.ValidString(v) {
			return "", false, false
		}
		q := strconv.Quote(v)
		if !isPlainJSON(q) {
			return "", false, false
		}
		return q, lf.str(v), true
	}
	n, parsed := parseNum(lit)
	if !parsed {
		return "", false, false
	}
	ok, sure = lf.number(n)
	return lit.Value, ok, sure
}

// isPlainJSON says whether a Go-quoted string is also that string in JSON:
// printable ASCII with no escape.
func isPlainJSON(q string) bool {
	for i := 1; i < len(q)-1; i++ {
		if c := q[i]; c < 0x20 || c > 0x7e || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// A constraint is compiled from its form as CUE prints it, parsed: the
// evaluated value with its definitions inlined (#Name prints as its rune
// limit and pattern) and defaults marked, which Value.Expr does not take
// apart where a default stands beside bounds (*1.2 | >=1.0 & <=10).

// compileString compiles a string constraint of the forms the schema uses
// (a value, =~ and !~ a regular expression, strings.MinRunes and MaxRunes,
// string, and & and | of them), or returns nil.
func compileString(v cue.Value) func(string) bool {
	e, err := parser.ParseExpr("constraint", fmt.Sprint(v))
	if err != nil {
		return nil
	}
	return astString(e, 0)
}

func astString(e ast.Expr, depth int) func(string) bool {
	if depth > 16 {
		return nil
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		return astString(x.X, depth+1)
	case *ast.BinaryExpr:
		a, b := astString(x.X, depth+1), astString(x.Y, depth+1)
		if a == nil || b == nil {
			return nil
		}
		switch x.Op {
		case token.OR:
			return func(s string) bool { return a(s) || b(s) }
		case token.AND:
			return func(s string) bool { return a(s) && b(s) }
		}
	case *ast.UnaryExpr:
		switch x.Op {
		case token.MUL: // a default is one of the values
			return astString(x.X, depth+1)
		case token.MAT, token.NMAT:
			lit, ok := x.X.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return nil
			}
			pat, err := literal.Unquote(lit.Value)
			if err != nil {
				return nil
			}
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil
			}
			if x.Op == token.NMAT {
				return func(s string) bool { return !re.MatchString(s) }
			}
			return re.MatchString
		}
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return nil
		}
		want, err := literal.Unquote(x.Value)
		if err != nil {
			return nil
		}
		return func(s string) bool { return s == want }
	case *ast.Ident:
		if x.Name == "string" {
			return func(string) bool { return true }
		}
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		if !ok || len(x.Args) != 1 {
			return nil
		}
		pkg, ok := sel.X.(*ast.Ident)
		lit, isLit := x.Args[0].(*ast.BasicLit)
		if !ok || pkg.Name != "strings" || !isLit || lit.Kind != token.INT {
			return nil
		}
		n, err := strconv.Atoi(lit.Value)
		if err != nil {
			return nil
		}
		switch sel.Sel.(*ast.Ident).Name {
		case "MaxRunes":
			return func(s string) bool { return utf8.RuneCountInString(s) <= n }
		case "MinRunes":
			return func(s string) bool { return utf8.RuneCountInString(s) >= n }
		}
	}
	return nil
}

// compileNumber compiles a number constraint of the forms the schema uses
// (a value, number, int, uint, float, bounds, and & and | of them), or
// returns nil.
func compileNumber(v cue.Value) numCheck {
	e, err := parser.ParseExpr("constraint", fmt.Sprint(v))
	if err != nil {
		return nil
	}
	return astNumber(e, 0)
}

func astNumber(e ast.Expr, depth int) numCheck {
	if depth > 16 {
		return nil
	}
	switch x := e.(type) {
	case *ast.ParenExpr:
		return astNumber(x.X, depth+1)
	case *ast.BinaryExpr:
		a, b := astNumber(x.X, depth+1), astNumber(x.Y, depth+1)
		if a == nil || b == nil || (x.Op != token.OR && x.Op != token.AND) {
			return nil
		}
		or := x.Op == token.OR
		return func(n numLit) (bool, bool) {
			ra, sa := a(n)
			rb, sb := b(n)
			switch {
			case or && ((sa && ra) || (sb && rb)):
				return true, true
			case !or && ((sa && !ra) || (sb && !rb)):
				return false, true
			case !sa || !sb:
				return false, false
			}
			return !or, true
		}
	case *ast.UnaryExpr:
		switch x.Op {
		case token.MUL:
			return astNumber(x.X, depth+1)
		case token.GEQ, token.GTR, token.LEQ, token.LSS, token.NEQ:
			bound, ok := astLiteral(x.X)
			if !ok {
				return nil
			}
			op := x.Op
			return func(n numLit) (bool, bool) {
				c := n.r.Cmp(bound.r)
				switch op {
				case token.GEQ:
					return c >= 0, true
				case token.GTR:
					return c > 0, true
				case token.LEQ:
					return c <= 0, true
				case token.LSS:
					return c < 0, true
				}
				return c != 0, true
			}
		case token.SUB:
			if want, ok := astLiteral(x); ok {
				return concrete(want)
			}
		}
	case *ast.BasicLit:
		if want, ok := astLiteral(x); ok {
			return concrete(want)
		}
	case *ast.Ident:
		switch x.Name {
		case "number":
			return func(numLit) (bool, bool) { return true, true }
		case "int":
			return func(n numLit) (bool, bool) { return n.isInt, true }
		case "float":
			return func(n numLit) (bool, bool) { return !n.isInt, true }
		case "uint":
			return func(n numLit) (bool, bool) { return n.isInt && n.r.Sign() >= 0, true }
		}
	}
	return nil
}

// concrete is a number constraint of one value; an int against a float of
// the same value is CUE's to judge.
func concrete(want numLit) numCheck {
	return func(n numLit) (bool, bool) {
		if n.r.Cmp(want.r) != 0 {
			return false, true
		}
		return n.isInt == want.isInt, n.isInt == want.isInt
	}
}

// astLiteral reads a number literal of a printed constraint (a bound).
func astLiteral(e ast.Expr) (numLit, bool) {
	neg := false
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		neg, e = true, u.X
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || (lit.Kind != token.INT && lit.Kind != token.FLOAT) {
		return numLit{}, false
	}
	var info literal.NumInfo
	if literal.ParseNum(lit.Value, &info) != nil {
		return numLit{}, false
	}
	r, ok := new(big.Rat).SetString(info.String())
	if !ok {
		return numLit{}, false
	}
	if neg {
		r.Neg(r)
	}
	return numLit{r: r, isInt: lit.Kind == token.INT}, true
}
