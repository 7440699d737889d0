// Package values is setpoint's typed values: a count (replicas), bytes
// (memory), millicores (CPU), a duration, a string, or a structured value
// (a JSON object or list: a route table's config, a CPU set). Each type
// knows how it is parsed, printed, compared, stepped and rounded, so no
// stage downstream guesses a unit from an attribute's name.
package values

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Type of a value.
type Type uint8

// Types.
const (
	Invalid Type = iota
	Count
	Bytes
	Millicores
	Duration
	String
	Structured
)

var typeNames = [...]string{"invalid", "count", "bytes", "millicores", "duration", "string", "structured"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType reads a type's name.
func ParseType(s string) (Type, error) {
	for i, n := range typeNames {
		if n == s && i > 0 {
			return Type(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown value type %q (want count, bytes, millicores, duration, string or structured)", s)
}

// Numeric types are ordered and stepped.
func (t Type) Numeric() bool { return t >= Count && t <= Duration }

// Value is one typed value. The zero Value is invalid (absent).
type Value struct {
	t Type
	n int64  // count, bytes, millicores, nanoseconds
	s string // string; structured: compact JSON
}

// Constructors.
func CountOf(n int64) Value             { return Value{t: Count, n: n} }
func BytesOf(n int64) Value             { return Value{t: Bytes, n: n} }
func MillicoresOf(n int64) Value        { return Value{t: Millicores, n: n} }
func DurationOf(d time.Duration) Value  { return Value{t: Duration, n: int64(d)} }
func StringOf(s string) Value           { return Value{t: String, s: s} }
func (v Value) WithInt(n int64) Value   { return Value{t: v.t, n: n} }
func (v Value) Type() Type              { return v.t }
func (v Value) IsValid() bool           { return v.t != Invalid }
func (v Value) Int() int64              { return v.n }
func (v Value) Duration() time.Duration { return time.Duration(v.n) }
func (v Value) Str() string             { return v.s }
func (v Value) JSON() json.RawMessage   { return json.RawMessage(v.s) }
func (v Value) Float() float64          { return float64(v.n) }
func (v Value) SameType(w Value) bool   { return v.t == w.t }
func (v Value) Equal(w Value) bool      { return v == w }
func (v Value) IsZeroNumber() bool      { return v.t.Numeric() && v.n == 0 }
func (v Value) Abs() int64              { return abs(v.n) }
func (v Value) Sub(w Value) int64       { return v.n - w.n }

// Numeric is a value of a numeric type t; of any other type, invalid.
func Numeric(t Type, n int64) Value {
	if !t.Numeric() {
		return Value{}
	}
	return Value{t: t, n: n}
}

// MaxStructured bounds a structured value's JSON (a route table's config):
// values come from providers and saved plans.
const MaxStructured = 1 << 20

// StructuredOf compacts raw JSON into a structured value.
func StructuredOf(raw []byte) (Value, error) {
	if len(raw) > MaxStructured {
		return Value{}, fmt.Errorf("structured value of %d bytes: at most %d", len(raw), MaxStructured)
	}
	// Canonical: compact, object keys sorted, numbers as written, so two
	// writings of one value are one value (a provider's read of what was
	// applied compares equal to it).
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return Value{}, fmt.Errorf("structured value: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, fmt.Errorf("structured value: more after the value")
	}
	switch x.(type) {
	case map[string]any, []any:
	default:
		return Value{}, fmt.Errorf("structured value: want a JSON object or list")
	}
	x = numbers(x)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return Value{}, fmt.Errorf("structured value: %w", err)
	}
	return Value{t: Structured, s: strings.TrimSuffix(b.String(), "\n")}, nil
}

// numbers writes each number as an API server's unstructured form holds
// it (an int64 when it is one, else a float64), so 1.0 and 1, or 1e3 and
// 1000, are one value whichever side wrote them.
func numbers(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		if f, err := v.Float64(); err == nil {
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				return int64(f)
			}
			return f
		}
	}
	return x
}

// Parse reads a value of type t from its printed form: "3", "256Mi",
// "500m", "30s", any string, or JSON.
func Parse(t Type, s string) (Value, error) {
	switch t {
	case Count:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("%q is not a count", s)
		}
		return CountOf(n), nil
	case Bytes:
		neg, rest := sign(s)
		if rest == "0" {
			return BytesOf(0), nil
		}
		b, err := spec.ParseBytes(rest)
		if err != nil {
			return Value{}, err
		}
		return BytesOf(neg * int64(b)), nil
	case Millicores:
		neg, rest := sign(s)
		if rest == "0" || rest == "0m" {
			return MillicoresOf(0), nil
		}
		c, err := spec.ParseMilliCPU(rest)
		if err != nil {
			return Value{}, err
		}
		return MillicoresOf(neg * int64(c)), nil
	case Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return Value{}, fmt.Errorf("%q is not a duration", s)
		}
		return DurationOf(d), nil
	case String:
		return StringOf(s), nil
	case Structured:
		return StructuredOf([]byte(s))
	}
	return Value{}, fmt.Errorf("cannot parse a value of type %s", t)
}

// sign splits a leading minus: values read back what they print, and a
// difference can be negative.
func sign(s string) (int64, string) {
	if r, ok := strings.CutPrefix(s, "-"); ok {
		return -1, r
	}
	return 1, s
}

// exactBytes prints bytes in the largest binary unit that divides them,
// else as a plain integer: always read back exactly.
func exactBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// String prints the value as a user writes it.
func (v Value) String() string {
	switch v.t {
	case Count:
		return strconv.FormatInt(v.n, 10)
	case Bytes:
		return exactBytes(v.n)
	case Millicores:
		if v.n%1000 == 0 {
			return strconv.FormatInt(v.n/1000, 10)
		}
		return strconv.FormatInt(v.n, 10) + "m"
	case Duration:
		return time.Duration(v.n).String()
	case String, Structured:
		return v.s
	}
	return "(none)"
}

// Compare orders two values of one numeric type (-1, 0, 1); strings and
// structured values compare by their text. Values of different types
// compare by type, so a sort is still total.
func (v Value) Compare(w Value) int {
	if v.t != w.t {
		return cmpInt(int64(v.t), int64(w.t))
	}
	if v.t.Numeric() {
		return cmpInt(v.n, w.n)
	}
	return strings.Compare(v.s, w.s)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Max and Min of two values of one type.
func Max(a, b Value) Value {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

func Min(a, b Value) Value {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}

// Granule is the unit a type's steps round to: 1 replica, 16Mi, 1m of
// CPU, 1 s.
func (t Type) Granule() int64 {
	switch t {
	case Bytes:
		return 16 << 20
	case Duration:
		return int64(time.Second)
	case Count, Millicores:
		return 1
	}
	return 0
}

// RoundUp rounds a numeric value up to a multiple of its granule
// (roundUp16Mi for memory).
func (v Value) RoundUp() Value {
	g := v.t.Granule()
	if g <= 1 {
		return v
	}
	return v.WithInt(ceilDiv(v.n, g) * g)
}

func ceilDiv(a, g int64) int64 {
	q := a / g
	if a%g != 0 && a > 0 {
		q++
	}
	return q
}

// Within reports whether v is within tolerance (a fraction) of anchor;
// counts allow at least one. Non-numeric values are within only when
// equal.
func Within(anchor, v Value, tolerance float64) bool {
	if !anchor.t.Numeric() || anchor.t != v.t {
		return anchor == v
	}
	tol := tolerance * math.Abs(float64(anchor.n))
	if anchor.t == Count {
		tol = max(tol, 1)
	}
	return math.Abs(float64(v.n-anchor.n)) <= tol+1e-9
}

// Step bounds one move from cur toward want to a fraction of cur. Counts:
// |Δ| ≤ max(1, floor(pct × cur)). Other numbers: |Δ| ≤ pct × cur, the
// bounded value rounded to the granule toward cur (so the bound always
// holds), or unrounded when no granule multiple lies strictly between.
// Strings and structured values are not stepped. (The plan says how a
// value was bounded: plan.Bound.)
func Step(cur, want Value, pct float64) Value {
	if pct <= 0 || want == cur || !cur.t.Numeric() || cur.t != want.t {
		return want
	}
	delta := want.n - cur.n
	if cur.t == Count {
		maxD := max(int64(1), int64(math.Floor(pct*float64(cur.n)+1e-9)))
		if abs(delta) <= maxD {
			return want
		}
		if delta < 0 {
			return cur.WithInt(cur.n - maxD)
		}
		return cur.WithInt(cur.n + maxD)
	}
	maxD := pct * float64(cur.n)
	if cur.n == 0 {
		// No proportion of nothing moves: from zero (an absent limit)
		// there is no step to bound.
		return want
	}
	if float64(abs(delta)) <= maxD+1e-6 {
		return want
	}
	g := float64(cur.t.Granule())
	var v int64
	if delta > 0 {
		v = int64(math.Floor((float64(cur.n)+maxD)/g)) * int64(g)
		if v <= cur.n {
			v = cur.n + int64(maxD)
		}
	} else {
		v = int64(math.Ceil((float64(cur.n)-maxD)/g)) * int64(g)
		if v >= cur.n {
			v = cur.n - int64(maxD)
		}
	}
	return cur.WithInt(v)
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// wire is the JSON form: the type beside the printed value (structured
// values inline).
type wire struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// MarshalJSON writes {"type":"bytes","value":"256Mi"}.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.t == Invalid {
		return []byte("null"), nil
	}
	var raw []byte
	if v.t == Structured {
		raw = []byte(v.s)
	} else {
		raw, _ = json.Marshal(v.String())
	}
	return json.Marshal(wire{Type: v.t.String(), Value: raw})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (v *Value) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*v = Value{}
		return nil
	}
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("value: %w", err)
	}
	t, err := ParseType(w.Type)
	if err != nil {
		return err
	}
	if t == Structured {
		x, err := StructuredOf(w.Value)
		*v = x
		return err
	}
	var s string
	if err := json.Unmarshal(w.Value, &s); err != nil {
		return fmt.Errorf("value of type %s: want a string", t)
	}
	x, err := Parse(t, s)
	*v = x
	return err
}
