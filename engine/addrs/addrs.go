// Package addrs names what setpoint acts on: an object
// (PROVIDER:Kind/namespace/name, or PROVIDER:Kind/name when cluster-scoped)
// and an attribute path on it, with map keys and list selectors in
// brackets. Each has one parser and one printer; everything downstream
// works on the parsed values and never parses a string again.
package addrs

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Object names one object a provider serves. Namespace is empty for
// cluster-scoped kinds.
type Object struct {
	Provider, Kind, Namespace, Name string
}

// String prints PROVIDER:Kind/namespace/name, or PROVIDER:Kind/name.
func (a Object) String() string {
	if a.Namespace == "" {
		return a.Provider + ":" + a.Kind + "/" + a.Name
	}
	return a.Provider + ":" + a.Kind + "/" + a.Namespace + "/" + a.Name
}

// Key is the address without its provider, as a provider indexes objects.
func (a Object) Key() string {
	if a.Namespace == "" {
		return a.Kind + "/" + a.Name
	}
	return a.Kind + "/" + a.Namespace + "/" + a.Name
}

// IsZero reports whether the address is empty.
func (a Object) IsZero() bool { return a == Object{} }

// ParseObject reads "sim:Deployment/shop/checkout" or "sim:Cluster/eu-1".
func ParseObject(s string) (Object, error) {
	prov, rest, ok := strings.Cut(s, ":")
	if !ok || prov == "" {
		return Object{}, fmt.Errorf("address %q: want PROVIDER:Kind/namespace/name or PROVIDER:Kind/name", s)
	}
	parts := strings.Split(rest, "/")
	for _, p := range parts {
		if p == "" {
			return Object{}, fmt.Errorf("address %q: an empty part; want PROVIDER:Kind/namespace/name or PROVIDER:Kind/name", s)
		}
	}
	switch len(parts) {
	case 2:
		return Object{Provider: prov, Kind: parts[0], Name: parts[1]}, nil
	case 3:
		return Object{Provider: prov, Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
	}
	return Object{}, fmt.Errorf("address %q: want PROVIDER:Kind/namespace/name or PROVIDER:Kind/name", s)
}

// StepKind says what one step of a path selects.
type StepKind uint8

// Step kinds.
const (
	Field    StepKind = iota + 1 // .name
	MapKey                       // ["key"]
	Selector                     // [name=value]: the list element whose field name has value
	Index                        // [3]
)

// Step is one element of a path.
type Step struct {
	Kind StepKind
	// Name is the field name (Field), the map key (MapKey) or the
	// selector's field (Selector).
	Name string
	// Value is the selector's value.
	Value string
	// N is the list index.
	N int
}

// Path is a parsed attribute path. It holds only its canonical text, so
// it is comparable and keys maps; its steps are kept in a bounded cache
// filled when the path is parsed or built, so they are not parsed again.
type Path struct {
	text string
}

var (
	stepsMu    sync.RWMutex
	stepsCache = map[string][]Step{}
)

// maxCachedPaths bounds the steps cache: paths come from providers.
const maxCachedPaths = 1 << 16

func remember(text string, steps []Step) {
	stepsMu.Lock()
	if len(stepsCache) >= maxCachedPaths {
		clear(stepsCache)
	}
	stepsCache[text] = steps
	stepsMu.Unlock()
}

// String prints the path in its canonical form:
// spec.template.spec.containers[name=app].resources.requests.memory,
// metadata.annotations["autoscaling.knative.dev/min-scale"].
func (p Path) String() string { return p.text }

// Steps returns the parsed steps (do not modify).
func (p Path) Steps() []Step {
	if p.text == "" {
		return nil
	}
	stepsMu.RLock()
	st, ok := stepsCache[p.text]
	stepsMu.RUnlock()
	if ok {
		return st
	}
	// Evicted: the text is canonical, so it parses.
	q, err := parse(p.text)
	if err != nil {
		return nil
	}
	return q
}

// IsZero reports whether the path is empty.
func (p Path) IsZero() bool { return p.text == "" }

// Equal compares paths by their canonical text.
func (p Path) Equal(q Path) bool { return p.text == q.text }

// HasPrefix reports whether q's steps start p.
func (p Path) HasPrefix(q Path) bool {
	ps, qs := p.Steps(), q.Steps()
	if len(qs) > len(ps) {
		return false
	}
	for i := range qs {
		if ps[i] != qs[i] {
			return false
		}
	}
	return true
}

// Last returns the last step.
func (p Path) Last() Step {
	s := p.Steps()
	if len(s) == 0 {
		return Step{}
	}
	return s[len(s)-1]
}

// Selected returns the value of the first selector on field name in the
// path (the container of a container path), if any.
func (p Path) Selected(field string) (string, bool) {
	for _, s := range p.Steps() {
		if s.Kind == Selector && s.Name == field {
			return s.Value, true
		}
	}
	return "", false
}

// Child appends steps to a copy of p.
func (p Path) Child(steps ...Step) Path {
	all := append(append([]Step(nil), p.Steps()...), steps...)
	return FromSteps(all...)
}

// F, K and Sel build steps.
func F(name string) Step           { return Step{Kind: Field, Name: name} }
func K(key string) Step            { return Step{Kind: MapKey, Name: key} }
func Sel(field, value string) Step { return Step{Kind: Selector, Name: field, Value: value} }

// FromSteps builds a path from steps.
func FromSteps(steps ...Step) Path {
	var b strings.Builder
	for i, s := range steps {
		switch s.Kind {
		case Field:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.Name)
		case MapKey:
			b.WriteString("[")
			b.WriteString(strconv.Quote(s.Name))
			b.WriteString("]")
		case Selector:
			b.WriteString("[" + s.Name + "=" + s.Value + "]")
		case Index:
			b.WriteString("[" + strconv.Itoa(s.N) + "]")
		}
	}
	cp := append([]Step(nil), steps...)
	remember(b.String(), cp)
	return Path{text: b.String()}
}

// MaxPathLen bounds a path's text: paths come from providers and saved
// plans, and a path is a map key everywhere.
const MaxPathLen = 1024

// ParsePath reads a path: dotted field names, ["map key"] (a Go-quoted
// string), [field=value] selectors and [N] indexes.
func ParsePath(s string) (Path, error) {
	stepsMu.RLock()
	_, ok := stepsCache[s]
	stepsMu.RUnlock()
	if ok {
		return Path{text: s}, nil
	}
	steps, err := parse(s)
	if err != nil {
		return Path{}, err
	}
	return FromSteps(steps...), nil
}

func parse(s string) ([]Step, error) {
	if s == "" {
		return nil, fmt.Errorf("empty attribute path")
	}
	if len(s) > MaxPathLen {
		return nil, fmt.Errorf("attribute path of %d bytes: at most %d", len(s), MaxPathLen)
	}
	var steps []Step
	i := 0
	bad := func(why string) ([]Step, error) {
		return nil, fmt.Errorf("attribute path %q at byte %d: %s", s, i, why)
	}
	for i < len(s) {
		switch s[i] {
		case '.':
			if len(steps) == 0 || i+1 >= len(s) || s[i+1] == '.' || s[i+1] == '[' {
				return bad("a dot must separate two field names")
			}
			i++
		case '[':
			end := -1
			if i+1 < len(s) && s[i+1] == '"' {
				// A quoted key may hold ']' and '.'.
				q, err := strconv.QuotedPrefix(s[i+1:])
				if err != nil {
					return bad("unterminated map key")
				}
				key, _ := strconv.Unquote(q)
				j := i + 1 + len(q)
				if j >= len(s) || s[j] != ']' {
					return bad("a map key must be followed by ]")
				}
				steps = append(steps, Step{Kind: MapKey, Name: key})
				i = j + 1
				continue
			}
			end = strings.IndexByte(s[i:], ']')
			if end < 0 {
				return bad("unterminated [")
			}
			inner := s[i+1 : i+end]
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 && strconv.Itoa(n) == inner {
				steps = append(steps, Step{Kind: Index, N: n})
			} else if k, v, ok := strings.Cut(inner, "="); ok && k != "" && v != "" && !strings.ContainsAny(v, "[]") {
				steps = append(steps, Step{Kind: Selector, Name: k, Value: v})
			} else {
				return bad("want [\"key\"], [field=value] or [N]")
			}
			i += end + 1
			if i < len(s) && s[i] != '.' && s[i] != '[' {
				return bad("] must be followed by . or [")
			}
		default:
			j := i
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				if s[j] == ']' || s[j] == '"' || s[j] == ' ' {
					i = j
					return bad("unexpected character")
				}
				j++
			}
			steps = append(steps, Step{Kind: Field, Name: s[i:j]})
			i = j
		}
	}
	return steps, nil
}

// MustPath parses a path known at compile time.
func MustPath(s string) Path {
	p, err := ParsePath(s)
	if err != nil {
		panic(err)
	}
	return p
}

// MarshalText prints the path.
func (p Path) MarshalText() ([]byte, error) { return []byte(p.text), nil }

// UnmarshalText parses the path; empty text is the empty path (an
// object-level change, a delete, has none).
func (p *Path) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*p = Path{}
		return nil
	}
	q, err := ParsePath(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// MarshalText prints the address.
func (a Object) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses the address.
func (a *Object) UnmarshalText(b []byte) error {
	o, err := ParseObject(string(b))
	if err != nil {
		return err
	}
	*a = o
	return nil
}

// Attr is one attribute of one object.
type Attr struct {
	Object Object
	Path   Path
}

// String prints "ADDRESS PATH".
func (a Attr) String() string { return a.Object.String() + " " + a.Path.String() }
