package load

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/diag"
)

// Diagnostic is one problem with a spec, at the position the user wrote:
// the one diagnostics type of loader, engine and providers.
type Diagnostic = diag.Diagnostic

// Diagnostics is a list of problems; it is an error when not empty.
type Diagnostics = diag.Diagnostics

func posOf(p token.Pos, fallback string) spec.Pos {
	if !p.IsValid() {
		return spec.Pos{File: fallback}
	}
	f := p.Filename()
	if f == "" {
		f = fallback
	}
	return spec.Pos{File: f, Line: p.Line(), Col: p.Column()}
}

func at(fields []spec.FieldPos, path string, fallback spec.Pos) spec.Pos {
	return spec.NewSource(fallback, fields).PosOf(path)
}

// positions lists each dotted field path of a document's syntax tree with
// the position of its label, sorted by path. List elements are numbered from
// 0, as in CUE's error paths. Paths are interned: across a directory the
// same few dozen repeat.
func (l *Loader) positions(n ast.Node) []spec.FieldPos {
	var out []spec.FieldPos
	add := func(path string, p token.Pos) {
		if s, ok := l.paths[path]; ok {
			path = s
		} else {
			l.paths[path] = path
		}
		out = append(out, spec.FieldPos{Path: path, Line: int32(p.Line() + l.lineBase), Col: int32(p.Column())})
	}
	eachValue(n, func(path string, at token.Pos, _ ast.Node) bool {
		add(path, at)
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return slices.Clip(out)
}

var (
	reConflict   = regexp.MustCompile(`^conflicting values (.+?) and (.+?)( \(mismatched types (\w+) and (\w+)\))?$`)
	reOutOfBound = regexp.MustCompile(`^invalid value (.+) \(out of bound (.+)\)$`)
	reNotSatisfy = regexp.MustCompile(`^invalid value (.+) \(does not satisfy (.+)\)$`)
	reIncomplete = regexp.MustCompile(`^incomplete value (.+)$`)
	reDisjHeader = regexp.MustCompile(`^\d+ errors in empty disjunction:?$`)
)

// reNumber matches CUE's error for a number literal it cannot read: the
// YAML decoder turns .nan into NaN, .inf into +Inf, and an integer too long
// for 64 bits into "number & 123..." (plainNumbers undoes the last).
var reNumber = regexp.MustCompile(`^parse error: illegal number start "(.*)"$`)

// badNumber says what is wrong with a number CUE could not read; user is
// the value as written, when known (a sign is not part of lit).
func badNumber(lit, user string) (msg, expected string) {
	if strings.HasSuffix(user, lit) {
		lit = user
	}
	switch strings.TrimLeft(lit, "+-") {
	case "NaN", "Inf":
		return "invalid value " + lit, "a finite number"
	}
	return "invalid value " + strings.Replace(lit, "number & ", "", 1), "a number"
}

// plainNumbers rewrites the YAML decoder's "number & 123" literals (an
// integer too long for 64 bits, or one tagged !!float) as the number
// itself, which CUE reads at any size: the schema then says whether it is
// in range instead of CUE failing to parse its own literal.
func plainNumbers(n ast.Node) {
	ast.Walk(n, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.FLOAT {
			lit.Value = strings.TrimPrefix(lit.Value, "number & ")
		}
		return true
	}, nil)
}

// userValues maps the dotted path of every value a document's syntax
// holds to the value as CUE prints it in errors ("{" or "[" for a mapping
// or a list). It is taken before unmask cuts fields out of the syntax.
func userValues(doc ast.Node) map[string]string {
	out := map[string]string{}
	record := func(path string, n ast.Node) {
		switch x := n.(type) {
		case *ast.StructLit:
			out[path] = "{"
		case *ast.ListLit:
			out[path] = "["
		case *ast.BasicLit:
			out[path] = x.Value
		case *ast.UnaryExpr:
			if lit, ok := x.X.(*ast.BasicLit); ok {
				out[path] = x.Op.String() + lit.Value
			}
		case *ast.Ident:
			out[path] = x.Name
		}
	}
	record("", doc)
	eachValue(doc, func(path string, _ token.Pos, v ast.Node) bool {
		if _, dup := out[path]; dup {
			return false // a key given twice: the first value is the one shown
		}
		record(path, v)
		return true
	})
	return out
}

// eachValue calls visit for every field and list element of a document's
// syntax, in order, with its dotted path (list elements numbered from 0, as
// in CUE's error paths), where it is named (a field's label, an element
// itself) and its value; visit returns false to skip what is below it.
func eachValue(n ast.Node, visit func(path string, at token.Pos, v ast.Node) bool) {
	var walk func(prefix string, n ast.Node)
	walk = func(prefix string, n ast.Node) {
		var decls []ast.Decl
		switch x := n.(type) {
		case *ast.File:
			decls = x.Decls
		case *ast.StructLit:
			decls = x.Elts
		case *ast.ListLit:
			for i, el := range x.Elts {
				p := prefix + "." + strconv.Itoa(i)
				if visit(p, el.Pos(), el) {
					walk(p, el)
				}
			}
			return
		}
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
			if visit(p, f.Label.Pos(), f.Value) {
				walk(p, f.Value)
			}
		}
	}
	walk("", n)
}

// isUsers reports whether a value printed by CUE is the one the user wrote.
func isUsers(user, printed string) bool {
	switch user {
	case "":
		return false
	case "{", "[":
		return strings.HasPrefix(printed, user)
	}
	return user == printed
}

// describeGot prints a user's value in an error: a long list or mapping
// (a deeply nested one prints as kilobytes of brackets) by its kind.
func describeGot(v string) string {
	if len(v) <= 40 {
		return v
	}
	switch v[0] {
	case '[':
		return "a list"
	case '{':
		return "a mapping"
	}
	return v
}

// typeWords names CUE's kinds as a spec's author knows them.
var typeWords = map[string]string{"struct": "a mapping", "list": "a list", "string": "a string", "bool": "bool", "int": "int", "float": "number", "number": "number", "null": "null", "bytes": "bytes"}

// describeType says what the schema wanted where the user's value has the
// wrong type: a bare type or a pattern as such, anything else (a validator
// like strings.MaxRunes(63), a whole schema) by its kind.
func describeType(want, kind string) string {
	if typeNames[want] || strings.Contains(want, "=~") {
		return describeExpected(want)
	}
	if w, ok := typeWords[kind]; ok {
		return w
	}
	return describeExpected(want)
}

var typeNames = map[string]bool{"int": true, "float": true, "number": true, "string": true, "bool": true, "bytes": true, "struct": true, "list": true, "null": true}

// describePattern names the schemas' regular expressions in words.
func describePattern(bound string) string {
	switch {
	case strings.Contains(bound, "ns|us|"):
		return `a duration like "90s", "5m" or "1h30m"`
	case strings.Contains(bound, ")%$"):
		return `a percentage from 0% to 100%, like "10%"`
	case strings.Contains(bound, "Ki|Mi|Gi"):
		return `a memory quantity like "256Mi" or "1Gi"`
	case strings.Contains(bound, "[0-9]+m)"):
		return `a CPU quantity like "500m" or "0.5"`
	case strings.Contains(bound, "(\\\\.[a-z0-9]"):
		return "a DNS subdomain: lowercase letters, digits, '-' and '.'"
	case strings.Contains(bound, "[-a-z0-9]*"):
		return "a DNS label: lowercase letters, digits and '-', starting and ending alphanumeric"
	case strings.Contains(bound, "[0-9a-f]{64}"):
		return "64 lowercase hexadecimal digits"
	case strings.Contains(bound, "https?"):
		return "an http:// or https:// URL"
	}
	return bound
}

// hiddenField maps a schema check on a hidden field (_max) to the field the
// user wrote (max); such checks compare byte quantities.
func hiddenField(path []string) (string, bool) {
	if len(path) >= 2 && path[0] == "#Kinds" {
		path = path[2:]
	}
	out := make([]string, len(path))
	hidden := false
	for i, p := range path {
		if strings.HasPrefix(p, "_") && i < len(path)-1 {
			// Inside a hidden copy of a user's field (_providers:
			// providers & list.MinItems(1)): the error is reported at
			// the field itself too, so this one is dropped.
			return "", true
		}
		if strings.HasPrefix(p, "_") {
			p = strings.TrimPrefix(p, "_")
			hidden = true
		}
		out[i] = p
	}
	return strings.Join(out, "."), hidden
}

// asBytes prints a byte count the way users write it.
func asBytes(s string) string {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	return spec.Bytes(f).String()
}

func boundBytes(bound string) string {
	i := strings.IndexAny(bound, "0123456789")
	if i < 0 {
		return bound
	}
	return bound[:i] + " " + asBytes(bound[i:])
}

// fromCUE turns a CUE error into diagnostics at the user's positions: the
// position in the user's file is preferred over the schema's; of the several
// errors a failed disjunction yields for one field, only the most telling
// kind is kept (a bound or pattern over a type mismatch over a default's
// literal); disjunctions of literals collapse into one "expected one of"
// line; closedness errors list the fields that are allowed. values, when
// given, are the values the document's syntax holds (see userValues): CUE's
// messages do not say which of two conflicting values is the user's, and
// the value written there does. lineBase shifts the document's lines to
// the file's (see loadYAML).
func fromCUE(err error, file string, fields []spec.FieldPos, def cue.Value, values map[string]string, lineBase int) Diagnostics {
	docPos := spec.Pos{File: file, Line: 1, Col: 1}
	type cand struct {
		d        Diagnostic
		prio     int
		got, opt string // for literal conflicts (prio 0)
	}
	byPath := map[string][]cand{}
	var order []string
	var out Diagnostics
	for _, e := range cueerrors.Errors(err) {
		raw := e.Path()
		path, hidden := hiddenField(raw)
		if hidden && path == "" {
			continue
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if reDisjHeader.MatchString(msg) {
			continue
		}
		if len(raw) == 0 {
			if d, ok := syntaxError(e.Error(), file); ok {
				d.Pos.Line += lineBase
				out = append(out, d)
				continue
			}
		}
		if strings.TrimSpace(msg) == "" {
			// Some decoder errors carry their text only in Error().
			msg = strings.TrimPrefix(strings.TrimPrefix(e.Error(), file), ": ")
		}
		pos := spec.Pos{}
		for _, p := range cueerrors.Positions(e) {
			if p.IsValid() && p.Filename() == file {
				pos = posOf(p, file)
				pos.Line += lineBase
				break
			}
		}
		if hidden || pos.Line == 0 {
			pos = at(fields, path, docPos)
		}
		c := cand{d: Diagnostic{Pos: pos, Path: path, Message: msg}, prio: 3}
		d := &c.d
		switch {
		case msg == "field not allowed":
			d.Message = "unknown field"
			d.Expected = allowedFields(def, strings.Split(path, "."))
		case msg == "field is required but not present":
			d.Message = "missing required field"
		case reIncomplete.MatchString(msg):
			m := reIncomplete.FindStringSubmatch(msg)
			d.Message = "missing value"
			d.Expected = describeExpected(m[1])
		case reOutOfBound.MatchString(msg):
			m := reOutOfBound.FindStringSubmatch(msg)
			got, bound := m[1], m[2]
			switch {
			case strings.HasPrefix(bound, "=~") || strings.HasPrefix(bound, "!~"):
				d.Message = fmt.Sprintf("invalid value %s", got)
				d.Expected = describePattern(bound)
			case hidden:
				d.Message = fmt.Sprintf("%s is out of range", asBytes(got))
				d.Expected = boundBytes(bound)
			default:
				d.Message = fmt.Sprintf("%s is out of range", got)
				d.Expected = bound
			}
		case reNotSatisfy.MatchString(msg):
			m := reNotSatisfy.FindStringSubmatch(msg)
			d.Message = fmt.Sprintf("invalid value %s", m[1])
			d.Expected = describeValidator(m[2])
		case reNumber.MatchString(msg):
			d.Message, d.Expected = badNumber(reNumber.FindStringSubmatch(msg)[1], values[path])
		case reConflict.MatchString(msg):
			m := reConflict.FindStringSubmatch(msg)
			a, b := m[1], m[2]
			if m[3] != "" {
				// A type mismatch: the side the user wrote is the
				// value; failing that, the side that is a bare type or
				// a pattern is the schema's.
				got, want, wantType := a, b, m[5]
				if user := values[path]; isUsers(user, b) && !isUsers(user, a) {
					got, want, wantType = b, a, m[4]
				} else if user == "" && (typeNames[a] || strings.HasPrefix(a, "=~")) {
					got, want, wantType = b, a, m[4]
				}
				d.Message = "wrong type: " + describeGot(got)
				d.Expected = describeType(want, wantType)
				c.prio = 1
				if typeNames[want] || strings.HasPrefix(want, "=~") {
					c.prio = 2
				}
				break
			}
			c.prio, c.got, c.opt = 0, b, a
		}
		if _, ok := byPath[path]; !ok {
			order = append(order, path)
		}
		byPath[path] = append(byPath[path], c)
	}
	for _, path := range order {
		cs := byPath[path]
		best := 0
		for _, c := range cs {
			best = max(best, c.prio)
		}
		seen := map[string]bool{}
		var lits []cand
		for _, c := range cs {
			if c.prio != best {
				continue
			}
			if best == 0 {
				lits = append(lits, c)
				continue
			}
			if best < 3 && len(seen) > 0 {
				break // one type mismatch per field is enough
			}
			if k := c.d.Error(); !seen[k] {
				seen[k] = true
				out = append(out, c.d)
			}
		}
		if len(lits) > 0 {
			out = append(out, collapseEnum(lits[0].d, values[path], func(yield func(got, opt string) bool) {
				for _, c := range lits {
					if !yield(c.got, c.opt) {
						return
					}
				}
			}))
		}
	}
	return out
}

var reSyntax = regexp.MustCompile(`^(.*?):(\d+)(?::(\d+))?: (.*)$`)

// syntaxError reads the YAML decoder's "file:line: message" errors, which
// carry no structured position.
func syntaxError(text, file string) (Diagnostic, bool) {
	m := reSyntax.FindStringSubmatch(text)
	if m == nil {
		return Diagnostic{}, false
	}
	line, _ := strconv.Atoi(m[2])
	col := 1
	if m[3] != "" {
		col, _ = strconv.Atoi(m[3])
	}
	msg := m[4]
	// The YAML parser reports its "did not find expected ..." errors at a
	// 0-based line (an unclosed flow collection at the line it opened).
	if strings.HasPrefix(msg, "did not find expected") {
		line++
	}
	if strings.HasPrefix(msg, "did not find expected ',' or") {
		msg += ": an unclosed [ or { starts here"
	}
	d := Diagnostic{Pos: spec.Pos{File: file, Line: line, Col: col}, Message: "syntax error: " + msg}
	if strings.Contains(msg, "aliases expand") {
		d.Message = "YAML aliases " + strings.TrimPrefix(msg, "aliases ")
		d.Expected = "a document without an alias bomb"
	}
	return d, true
}

// collapseEnum turns the conflicts "A and X", "B and X", "C and X" of one
// field into "X is not allowed (expected one of A, B, C)". CUE does not say
// which side is the user's: the value the user wrote (user, "" if unknown)
// when it is in every pair, else the value common to every pair.
func collapseEnum(d Diagnostic, user string, pairs func(func(got, opt string) bool)) Diagnostic {
	count := map[string]int{}
	n := 0
	pairs(func(a, b string) bool {
		count[a]++
		count[b]++
		n++
		return true
	})
	got := ""
	if user != "" && count[user] == n {
		got = user
	} else {
		for v, c := range count {
			if c == n && (got == "" || v < got) {
				got = v
			}
		}
	}
	var opts []string
	pairs(func(a, b string) bool {
		if a == got {
			opts = append(opts, b)
		} else {
			opts = append(opts, a)
		}
		return true
	})
	sort.Strings(opts)
	opts = compactStrings(opts)
	d.Message = fmt.Sprintf("%s is not allowed", got)
	if len(opts) == 1 {
		d.Expected = opts[0]
	} else {
		d.Expected = "one of " + strings.Join(opts, ", ")
	}
	return d
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

var reValidator = regexp.MustCompile(`^(list\.MinItems|list\.MaxItems|strings\.MinRunes|strings\.MaxRunes)\((\d+)\)$`)

var validatorWords = map[string]string{
	"list.MinItems":    "at least %s item",
	"list.MaxItems":    "at most %s item",
	"strings.MinRunes": "at least %s character",
	"strings.MaxRunes": "at most %s character",
}

// describeValidator names the schemas' builtin validators in words.
func describeValidator(v string) string {
	if strings.HasPrefix(v, "list.UniqueItems") {
		return "no duplicate items"
	}
	if m := reValidator.FindStringSubmatch(v); m != nil {
		return plural(fmt.Sprintf(validatorWords[m[1]], m[2]), m[2])
	}
	return "to satisfy " + v
}

// plural adds an "s" to a phrase about n things unless n is 1.
func plural(phrase, n string) string {
	if n == "1" {
		return phrase
	}
	return phrase + "s"
}

func describeExpected(s string) string {
	if strings.HasPrefix(s, "=~") {
		return describePattern(s)
	}
	switch {
	case strings.HasPrefix(s, "{"):
		// A whole schema: its fields are reported one by one.
		return "a mapping"
	case strings.HasPrefix(s, "["):
		return "a list"
	}
	if strings.Contains(s, "=~") {
		// A disjunction of a type and a pattern, e.g. int | =~"…".
		for _, part := range strings.Split(s, " | ") {
			if strings.HasPrefix(part, "=~") {
				return describePattern(part)
			}
		}
	}
	return s
}

// lookupDef finds path in a schema value, through optional fields and list
// element types, which a plain LookupPath does not enter.
func lookupDef(def cue.Value, path []string) cue.Value {
	v := def
	for _, p := range path {
		if _, err := strconv.Atoi(p); err == nil {
			v = v.LookupPath(cue.MakePath(cue.AnyIndex))
			continue
		}
		next := v.LookupPath(cue.MakePath(cue.Str(p)))
		if !next.Exists() {
			next = v.LookupPath(cue.MakePath(cue.Str(p).Optional()))
		}
		v = next
		if !v.Exists() {
			return v
		}
	}
	return v
}

// allowedFields lists the fields the schema allows next to an unknown one.
func allowedFields(def cue.Value, path []string) string {
	const vague = "a field the schema defines"
	if !def.Exists() || len(path) == 0 {
		return vague
	}
	parent := lookupDef(def, path[:len(path)-1])
	if !parent.Exists() {
		return vague
	}
	it, err := parent.Fields(cue.Optional(true))
	if err != nil {
		return vague
	}
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	if len(names) == 0 {
		return vague
	}
	sort.Strings(names)
	return "one of " + strings.Join(names, ", ")
}

var (
	_ = spec.RegisterCheck(spec.Check{Path: "metadata.name", What: "each kind/namespace/name once across the files", Why: spec.WhySpans, Example: "checks/duplicate-name.yaml"})
	_ = spec.RegisterCheck(spec.Check{Path: "spec.target", What: "one spec of a kind per target (two NFRs on one Deployment would fight)", Why: spec.WhySpans, Example: "checks/same-target.yaml"})
	_ = spec.RegisterCheck(spec.Check{Path: "kind", What: "one Environment per directory", Why: spec.WhySpans, Example: "checks/two-environments.yaml"})
	_ = spec.RegisterCheck(spec.Check{Path: "spec.target.provider", What: "an NFR's target.provider is one of the Environment's providers", Why: spec.WhySpans, Example: "checks/unknown-provider.yaml"})
	_ = spec.RegisterCheck(spec.Check{Kind: "Environment", Path: "spec.providers.*.name", What: "each provider listed once", Why: spec.WhyCompare, Example: "checks/provider-twice.yaml"})
	_ = spec.RegisterCheck(spec.Check{Kind: "Schedule", Path: "spec.dependsOn", What: "no dependency cycle among a namespace's Schedules", Why: spec.WhySpans, Example: "sets/schedule-cycle.yaml"})
)

// CrossCheck runs the rules CUE cannot express because they span documents
// (or need the Environment: a memory window within the embedded store's
// retention) or the file system (the trace an Environment names exists).
// They are `setpoint validate`-only: `cue vet` checks one document at a time.
func CrossCheck(docs []spec.Document, needEnv bool) Diagnostics {
	var out Diagnostics
	byID := map[string]spec.Document{}
	byTarget := map[string]spec.Document{}
	var envs []*spec.Environment
	def := ""
	for _, d := range docs {
		if e, ok := d.(*spec.Environment); ok && len(e.Spec.Providers) > 0 {
			def = e.Spec.Providers[0].Name
			break
		}
	}
	for _, d := range docs {
		h := d.Head()
		if first, dup := byID[h.ID()]; dup {
			out = append(out, Diagnostic{Pos: h.Src.PosOf("metadata.name"), Path: "metadata.name",
				Message:  fmt.Sprintf("duplicate %s, first defined at %s", h.ID(), first.Head().Src.PosOf("metadata.name")),
				Expected: "a unique kind/namespace/name"})
			continue
		}
		byID[h.ID()] = d
		if t, ok := d.(spec.Targeter); ok {
			key := h.Kind + " " + t.TargetKey(def)
			if first, dup := byTarget[key]; dup {
				fh := first.Head()
				out = append(out, Diagnostic{Pos: h.Src.PosOf("spec.target"), Path: "spec.target",
					Message:  fmt.Sprintf("%s %s targets the same workload as %s at %s", h.Kind, h.Metadata.Name, fh.Metadata.Name, fh.Src.PosOf("spec.target")),
					Expected: fmt.Sprintf("one %s per target", h.Kind)})
			} else {
				byTarget[key] = d
			}
		}
		if e, ok := d.(*spec.Environment); ok {
			envs = append(envs, e)
		}
	}
	out = append(out, scheduleCycles(docs)...)
	out = append(out, scheduleDependencies(docs)...)
	out = append(out, nodePolicyOverlaps(docs, def)...)
	out = append(out, routeGroupVIPs(docs, def)...)
	for i, e := range envs {
		if i > 0 {
			out = append(out, Diagnostic{Pos: e.Src.Pos, Path: "kind",
				Message:  fmt.Sprintf("second Environment %s; the first is %s at %s", e.Metadata.Name, envs[0].Metadata.Name, envs[0].Src.Pos),
				Expected: "one Environment per directory"})
		}
	}
	for _, e := range envs {
		// Relative paths are the Environment file's.
		for _, fe := range e.CheckFiles(filepath.Dir(e.Src.Pos.File)) {
			out = append(out, Diagnostic{Pos: e.Src.PosOf(fe.Path), Path: fe.Path, Message: fe.Message, Expected: fe.Expected})
		}
	}
	if len(envs) > 0 {
		env := envs[0]
		if src := env.Spec.Signals.Default; src == "" || src == "embedded" {
			// The embedded store keeps a fixed window of history; a
			// longer memory window would average less than it says.
			for _, d := range docs {
				if n, ok := d.(*spec.NFR); ok {
					for _, fe := range n.CheckWindow(spec.EmbeddedRetention) {
						out = append(out, Diagnostic{Pos: n.Src.PosOf(fe.Path), Path: fe.Path, Message: fe.Message, Expected: fe.Expected})
					}
				}
			}
		}
		names := map[string]bool{}
		for i, p := range env.Spec.Providers {
			if names[p.Name] {
				path := fmt.Sprintf("spec.providers.%d.name", i)
				out = append(out, Diagnostic{Pos: env.Src.PosOf(path), Path: path, Message: fmt.Sprintf("provider %s listed twice", p.Name), Expected: "unique provider names"})
			}
			names[p.Name] = true
		}
		for _, d := range docs {
			n, ok := d.(*spec.NFR)
			if !ok || n.Spec.Target.Provider == "" || names[n.Spec.Target.Provider] {
				continue
			}
			out = append(out, Diagnostic{Pos: n.Src.PosOf("spec.target.provider"), Path: "spec.target.provider",
				Message:  fmt.Sprintf("provider %s is not in the Environment", n.Spec.Target.Provider),
				Expected: "one of the Environment's providers"})
		}
	} else if needEnv && len(docs) > 0 {
		out = append(out, Diagnostic{Pos: docs[0].Head().Src.Pos, Message: "no Environment among the specs", Expected: "one kind: Environment document per directory"})
	}
	boundMessages(out)
	return out
}

// scheduleCycles refuses dependency cycles among the Schedules of a
// namespace, naming every file of the cycle (a workload that waits for
// itself through others would never wake).
func scheduleCycles(docs []spec.Document) []Diagnostic {
	type key struct{ ns, name string }
	byTarget := map[key]*spec.Schedule{}
	deps := map[string][]string{}
	for _, d := range docs {
		s, ok := d.(*spec.Schedule)
		if !ok {
			continue
		}
		k := key{s.Metadata.Namespace, s.Spec.Target.Name}
		if _, dup := byTarget[k]; dup {
			continue
		}
		byTarget[k] = s
		from := s.Metadata.Namespace + "/" + s.Spec.Target.Name
		for _, dep := range s.Spec.DependsOn {
			_, name := spec.SplitDependency(dep)
			deps[from] = append(deps[from], s.Metadata.Namespace+"/"+name)
		}
	}
	cycle := spec.DependencyCycle(deps)
	if cycle == nil {
		return nil
	}
	var where []string
	for _, n := range cycle[:len(cycle)-1] {
		ns, name, _ := strings.Cut(n, "/")
		if s := byTarget[key{ns, name}]; s != nil {
			where = append(where, fmt.Sprintf("%s (%s)", name, s.Src.PosOf("spec.dependsOn")))
		}
	}
	first := byTarget[func() key { ns, name, _ := strings.Cut(cycle[0], "/"); return key{ns, name} }()]
	return []Diagnostic{{Pos: first.Src.PosOf("spec.dependsOn"), Path: "spec.dependsOn",
		Message:  "dependency cycle: " + strings.Join(cycleNames(cycle), " → ") + "; in " + strings.Join(where, ", "),
		Expected: "dependencies without a cycle (a workload in a cycle would wait for itself)"}}
}

func cycleNames(c []string) []string {
	out := make([]string, len(c))
	for i, n := range c {
		_, out[i], _ = strings.Cut(n, "/")
	}
	return out
}
