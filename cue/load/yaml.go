package load

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"

	cueyaml "cuelang.org/go/encoding/yaml"
	"go.yaml.in/yaml/v3"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// loadYAML validates each document of a YAML stream. The stream is read
// with one decoder while it parses; once the YAML parser fails, it cannot
// resynchronise, so the rest of the file is read again one document at a
// time, cut at the "---" lines (which YAML forbids inside any document's
// content, so the cut is exact), each with the count of lines before it so
// that positions stay those of the file. A broken document costs only
// itself: the README promises one bad spec never stops the others.
func (l *Loader) loadYAML(path string, src []byte, emit func(spec.Document)) (diags Diagnostics) {
	defer func() { l.lineBase = 0 }()
	l.lineBase = 0
	dec := cueyaml.NewDecoder(path, bytes.NewReader(src))
	last := 0 // line of the last document read whole
	for {
		expr, err := dec.Extract()
		if err == io.EOF {
			return diags
		}
		if err != nil {
			found, ds := l.resync(path, src, last, emit)
			diags = append(diags, ds...)
			if !found {
				// The error lies in no document after the last one
				// read (a document not cut by "---"): report it as
				// the stream decoder saw it.
				diags = append(diags, yamlError(err, path, src, 0, len(src), 0))
			}
			return diags
		}
		if line := expr.Pos().Line(); line > 0 {
			last = line
		}
		if isEmptyDoc(expr) {
			continue
		}
		diags = append(diags, l.doc(path, expr, emit)...)
	}
}

// resync loads, one at a time, the documents that start after the line of
// the last document read (0: none was). found reports whether a YAML
// error was met among them.
func (l *Loader) resync(path string, src []byte, last int, emit func(spec.Document)) (found bool, diags Diagnostics) {
	starts, lines := docStarts(src)
	// The document holding line last ends at the next start after it.
	i := 0
	if last > 0 {
		for i < len(starts) && lines[i] <= last {
			i++
		}
	}
	for ; i < len(starts); i++ {
		end := len(src)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		base := lines[i] - 1
		l.lineBase = base
		dec := cueyaml.NewDecoder(path, bytes.NewReader(src[starts[i]:end]))
		for {
			expr, err := dec.Extract()
			if err == io.EOF {
				break
			}
			if err != nil {
				found = true
				diags = append(diags, yamlError(err, path, src, starts[i], end, base))
				break
			}
			if isEmptyDoc(expr) {
				continue
			}
			diags = append(diags, l.doc(path, expr, emit)...)
		}
	}
	l.lineBase = 0
	return found, diags
}

// docStarts returns the byte offset and the 1-based line of each document
// of src: the start of the file and every "---" line.
func docStarts(src []byte) (offsets, lines []int) {
	offsets, lines = []int{0}, []int{1}
	line := 1
	for off := 0; off < len(src); {
		nl := bytes.IndexByte(src[off:], '\n')
		next := len(src)
		if nl >= 0 {
			next = off + nl + 1
		}
		if off > 0 && isDocMarker(src[off:next]) {
			offsets, lines = append(offsets, off), append(lines, line)
		}
		off = next
		line++
	}
	return offsets, lines
}

// isDocMarker reports whether a line is a document start marker: "---"
// at the start of the line, alone or followed by blank space.
func isDocMarker(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("---"))
	return ok && (len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '\r' || rest[0] == '\n')
}

var (
	reYAMLLine   = regexp.MustCompile(`(?s)^(\d+): (.*)$`)
	reAliasLimit = regexp.MustCompile(`aliases expand to more than (\d+) nodes`)
	reAnchor     = regexp.MustCompile(`unknown anchor '(.*)' referenced`)
	reKindLine   = regexp.MustCompile(`(?m)^kind:[ \t]*["']?([A-Za-z]+)["']?[ \t]*(?:#.*)?\r?$`)
	reYAMLv3Line = regexp.MustCompile(`^yaml: line (\d+): did not find expected (key|'-' indicator)`)
)

// yamlError turns a YAML decoder error about the document src[start:end]
// (whose first line is line base+1 of the file) into a diagnostic at the
// line and column of the file. The decoder reports a line only, and for
// some errors the line where the construct began; the column is found
// from the line's text and the kind of error.
func yamlError(err error, path string, src []byte, start, end, base int) Diagnostic {
	// The decoder says "path:line: message", or "path: message" when the
	// YAML parser gave no line.
	msg, line := err.Error(), 0
	if rest, ok := strings.CutPrefix(msg, path+":"); ok {
		msg = strings.TrimSpace(rest)
		if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
	}
	doc := src[start:end]
	d := Diagnostic{Pos: spec.Pos{File: path}, Message: "syntax error: " + msg}
	if m := reKindLine.FindSubmatch(doc); m != nil {
		// What the document is, as far as its text says: an
		// Environment that does not parse still exists (see Load).
		d.Spec = string(m[1]) + "//"
	}
	switch {
	case reAliasLimit.MatchString(msg):
		d.Message = "YAML aliases " + strings.TrimPrefix(reAliasLimit.FindString(msg), "aliases ")
		d.Expected = "a document without an alias bomb"
		limit, _ := strconv.Atoi(reAliasLimit.FindStringSubmatch(msg)[1])
		if p, ok := aliasBomb(doc, limit); ok {
			d.Pos.Line, d.Pos.Col, d.Path = base+p.Line, p.Col, p.Path
			return d
		}
	case reAnchor.MatchString(msg):
		// Reported without a line: the alias is where it is used.
		name := reAnchor.FindStringSubmatch(msg)[1]
		d.Message = "YAML alias *" + name + " names no anchor"
		d.Expected = "an anchor &" + name + " defined before it"
		if i := bytes.Index(doc, []byte("*"+name)); i >= 0 {
			d.Pos.Line = base + 1 + bytes.Count(doc[:i], []byte("\n"))
			d.Pos.Col = i - bytes.LastIndexByte(doc[:i], '\n')
			return d
		}
	case strings.HasPrefix(msg, "exceeded max depth of "):
		d.Message = "nested more than " + strings.TrimPrefix(msg, "exceeded max depth of ") + " levels deep"
		d.Expected = "a shallower document"
	case strings.HasPrefix(msg, "did not find expected ',' or"):
		d.Message += ": an unclosed [ or { starts here"
	case strings.HasPrefix(msg, "did not find expected key"), strings.HasPrefix(msg, "did not find expected '-' indicator"):
		d.Message += ": check this line's indentation"
	case strings.HasPrefix(msg, "mapping values are not allowed"):
		d.Message += ": check the indentation, or quote a value that holds \": \""
	case strings.HasPrefix(msg, "found character that cannot start any token"):
		d.Message += ": a tab cannot indent YAML, and @ or ` cannot start a plain value"
	}
	// The YAML parser reports its "did not find expected ..." errors at
	// a 0-based line.
	if strings.HasPrefix(msg, "did not find expected") {
		line++
	}
	lines := bytes.Count(doc, []byte("\n"))
	if len(doc) > 0 && doc[len(doc)-1] != '\n' {
		lines++
	}
	switch {
	case line < 1:
		// No line given: the document's first line of content.
		line = firstContent(doc)
	case line > lines:
		// Past the end: the construct was still open at the end of
		// the document; it began on its last line at the latest.
		line = max(lines, 1)
		if lastOpen, ok := lastUnclosed(doc); ok {
			line = lastOpen
		}
	}
	if strings.HasPrefix(msg, "did not find expected key") || strings.HasPrefix(msg, "did not find expected '-' indicator") {
		line = problemLine(doc, line)
	}
	d.Pos.Line = base + line
	d.Pos.Col = errorColumn(lineText(doc, line), msg)
	return d
}

// problemLine finds the line of a block collection's error. The YAML
// parser reports such an error at the line where the mapping or sequence
// began, unless that is its input's first line: then at the line where it
// found what does not belong (a key indented one space too few, the usual
// mistake). So the text from the collection's first line on is parsed
// again, alone, which makes the parser name the line that is wrong.
func problemLine(doc []byte, start int) int {
	rest := doc
	for i := 1; i < start; i++ {
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return start
		}
		rest = rest[nl+1:]
	}
	err := yaml.NewDecoder(bytes.NewReader(rest)).Decode(new(yaml.Node))
	if err == nil {
		return start
	}
	m := reYAMLv3Line.FindStringSubmatch(err.Error())
	if m == nil {
		return start
	}
	n, _ := strconv.Atoi(m[1]) // 0-based for these parser errors
	if n < 1 || start+n > bytes.Count(doc, []byte("\n"))+1 {
		return start
	}
	return start + n
}

// lineText returns the 1-based line n of doc, without its newline.
func lineText(doc []byte, n int) []byte {
	for i := 1; i < n; i++ {
		nl := bytes.IndexByte(doc, '\n')
		if nl < 0 {
			return nil
		}
		doc = doc[nl+1:]
	}
	if nl := bytes.IndexByte(doc, '\n'); nl >= 0 {
		doc = doc[:nl]
	}
	return bytes.TrimSuffix(doc, []byte("\r"))
}

// firstContent returns the first line of doc that is not blank, a comment
// or a document marker (1 when there is none).
func firstContent(doc []byte) int {
	for n, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' && !isDocMarker(line) {
			return n + 1
		}
	}
	return 1
}

// lastUnclosed returns the line of the last [ or { of doc left unclosed.
func lastUnclosed(doc []byte) (int, bool) {
	type open struct{ line int }
	var stack []open
	line := 1
	scanFlow(doc, func(i int, c byte) {
		switch c {
		case '\n':
			line++
		case '[', '{':
			stack = append(stack, open{line})
		case ']', '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	})
	if len(stack) == 0 {
		return 0, false
	}
	return stack[len(stack)-1].line, true
}

// scanFlow calls f with each byte of src that is YAML syntax: outside
// quoted strings and comments. It is a scan for brackets, colons and
// quotes, not a parser: enough to place a column on a line the parser
// named.
func scanFlow(src []byte, f func(i int, c byte)) {
	var quote byte
	comment := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			comment = false
			f(i, c)
		case comment:
		case quote == '\'':
			if c == '\'' {
				if i+1 < len(src) && src[i+1] == '\'' {
					i++ // '' is an escaped quote
				} else {
					quote = 0
				}
			}
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case c == '#' && (i == 0 || src[i-1] == ' ' || src[i-1] == '\t'):
			comment = true
		case c == '"' || c == '\'':
			quote = c
			f(i, c)
		default:
			f(i, c)
		}
	}
}

// errorColumn places a YAML syntax error on its line (1-based column). The
// parser's messages name what it found or missed; the column is that of
// the construct they are about.
func errorColumn(line []byte, msg string) int {
	first := 1 + len(line) - len(bytes.TrimLeft(line, " \t-"))
	if first > len(line) {
		first = 1
	}
	var opens []int // offsets of unclosed [ and {
	mismatch, colon, quoteOpen, odd := -1, -1, -1, -1
	scanFlow(line, func(i int, c byte) {
		switch c {
		case '[', '{':
			opens = append(opens, i)
		case ']', '}':
			want := byte('[')
			if c == '}' {
				want = '{'
			}
			if n := len(opens); n > 0 && line[opens[n-1]] == want {
				opens = opens[:n-1]
			} else if mismatch < 0 {
				mismatch = i
			}
		case ':':
			if i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t' {
				colon = i
			}
		case '"', '\'':
			quoteOpen = i
		case '@', '`', '\t':
			if odd < 0 {
				odd = i
			}
		}
	})
	lastOpen := func(want byte) int {
		for i := len(opens) - 1; i >= 0; i-- {
			if want == 0 || line[opens[i]] == want {
				return opens[i] + 1
			}
		}
		return first
	}
	switch {
	case strings.HasPrefix(msg, "did not find expected ',' or '}'"):
		return lastOpen('{')
	case strings.HasPrefix(msg, "did not find expected ',' or ']'"):
		return lastOpen('[')
	case strings.HasPrefix(msg, "did not find expected node content"):
		if mismatch >= 0 {
			return mismatch + 1
		}
		return lastOpen(0)
	case strings.HasPrefix(msg, "mapping values are not allowed"):
		if colon >= 0 {
			return colon + 1
		}
	case strings.HasPrefix(msg, "found character that cannot start any token"):
		if odd >= 0 {
			return odd + 1
		}
	case strings.HasPrefix(msg, "found unexpected end of stream"):
		if quoteOpen >= 0 {
			return quoteOpen + 1
		}
	}
	return first
}

// bombPos is where an alias bomb goes off: the field whose value's
// aliases expand past the limit.
type bombPos struct {
	Line, Col int
	Path      string
}

// aliasBomb finds, in a YAML document, the field at which the expansion of
// aliases passes limit nodes, counting as CUE's decoder does: every node an
// alias produces, cumulatively over the document. The document is parsed
// without expanding anything, so this costs what the text does.
func aliasBomb(doc []byte, limit int) (bombPos, bool) {
	var root yaml.Node
	if yaml.NewDecoder(bytes.NewReader(doc)).Decode(&root) != nil {
		return bombPos{}, false
	}
	memo := map[*yaml.Node]int{}
	// size is the number of nodes n expands to, saturated past limit (an
	// alias cycle saturates at once).
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if v, ok := memo[n]; ok {
			return v
		}
		memo[n] = limit + 1 // in progress: a cycle
		total := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			total += size(n.Alias)
		}
		for i, c := range n.Content {
			// A mapping's plain keys become labels, which the
			// decoder does not count as nodes.
			if n.Kind == yaml.MappingNode && i%2 == 0 && c.Kind != yaml.AliasNode {
				continue
			}
			total = min(total+size(c), limit+1)
		}
		memo[n] = min(total, limit+1)
		return memo[n]
	}
	used := 0
	var found bombPos
	// field is the innermost mapping key above a node, and its path.
	type field struct {
		key  *yaml.Node
		path string
	}
	var walk func(n *yaml.Node, path string, in field) bool
	walk = func(n *yaml.Node, path string, in field) bool {
		if n.Kind == yaml.AliasNode {
			if n.Alias != nil {
				used += size(n.Alias)
			}
			if used > limit {
				found = bombPos{Line: n.Line, Col: n.Column, Path: path}
				if in.key != nil {
					found = bombPos{Line: in.key.Line, Col: in.key.Column, Path: in.path}
				}
				return true
			}
			return false
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + p
				}
				if walk(k, p, field{k, p}) || walk(v, p, field{k, p}) {
					return true
				}
			}
		default:
			for i, c := range n.Content {
				p := path
				if n.Kind == yaml.SequenceNode {
					p = strings.TrimPrefix(path+"."+strconv.Itoa(i), ".")
				}
				if walk(c, p, in) {
					return true
				}
			}
		}
		return false
	}
	if walk(&root, "", field{}) {
		return found, true
	}
	return bombPos{}, false
}
