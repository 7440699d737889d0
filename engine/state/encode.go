package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/setpoint-dev/setpoint/engine/values"
)

// encoder serializes a shard's attributes to the JSON encoding/json would
// write (bar HTML escaping inside structured and policy values, and numbers
// values prints inexactly), which encoding/json and the fast decoder both
// read back into the same entries. It is hand-written because Save
// serializes every shard to tell the changed ones, and encoding/json
// (reflection, a Marshal per typed value) took 11 µs a shard here: 220 ms
// for 20,000. TestEncoderMatchesEncodingJSON keeps it in step with the
// types: a field added to Entry or Applied fails it until it is encoded
// here and decoded in decode.go.
//
// Its output is deterministic (keys sorted, times in UTC), and encoding
// what Load decoded from a shard gives that shard's bytes again, so an
// unchanged shard hashes as it did when loaded.
type encoder struct {
	buf     []byte
	keys    []keyed
	pol     []string
	tmp     bytes.Buffer
	printed map[values.Value]string // exactPrint's answers
}

// attrs serializes x's stored entries (empty entries are not stored) into
// the encoder's buffer and returns it (valid until the next call), or nil
// when there is no stored entry. With canonical, each policy value is
// checked and compacted and attribute keys must be UTF-8, as a written
// shard needs; without it, policy values are copied as they are: the
// bytes only tell whether the shard changed, and only a changed shard is
// written (its policy values were checked when it was written or loaded).
func (enc *encoder) attrs(x *Object, canonical bool) ([]byte, error) {
	if x == nil {
		return nil, nil
	}
	keys := enc.keys[:0]
	for k, e := range x.Attrs {
		if !e.IsEmpty() {
			keys = append(keys, keyed{k, e})
		}
	}
	enc.keys = keys
	if len(keys) == 0 {
		return nil, nil
	}
	slices.SortFunc(keys, func(a, b keyed) int { return strings.Compare(a.k, b.k) })
	b := append(enc.buf[:0], '{')
	for i, ke := range keys {
		k := ke.k
		if i > 0 {
			b = append(b, ',')
		}
		if canonical && !utf8.ValidString(k) {
			return nil, fmt.Errorf("attribute %q: not valid UTF-8", k)
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = enc.entry(b, ke.e, canonical); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
	}
	b = append(b, '}')
	enc.buf = b
	return b, nil
}

func (enc *encoder) entry(b []byte, e *Entry, canonical bool) ([]byte, error) {
	b = append(b, '{')
	sep := false
	if e.User != nil {
		b = append(b, `"user":`...)
		var err error
		if b, err = enc.value(b, *e.User); err != nil {
			return nil, fmt.Errorf("user value: %w", err)
		}
		sep = true
	}
	if a := e.Applied; a != nil {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"applied":{"value":`...)
		var err error
		if b, err = enc.value(b, a.Value); err != nil {
			return nil, fmt.Errorf("applied value: %w", err)
		}
		at := a.At.UTC()
		if y := at.Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("applied at %s: the year is outside 0–9999", at)
		}
		b = append(b, `,"at":"`...)
		b = at.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
		if len(a.By) > 0 {
			b = append(b, `,"by":[`...)
			for i, s := range a.By {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, s)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
		sep = true
	}
	if len(e.Policy) > 0 {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"policy":{`...)
		pol := enc.pol[:0]
		for p := range e.Policy {
			pol = append(pol, p)
		}
		enc.pol = pol
		slices.Sort(pol)
		for i, p := range pol {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, p)
			b = append(b, ':')
			raw := e.Policy[p]
			switch {
			case len(raw) == 0:
				b = append(b, "null"...)
			case canonical:
				enc.tmp.Reset()
				if err := json.Compact(&enc.tmp, raw); err != nil {
					return nil, fmt.Errorf("policy %q: not valid JSON: %v", p, err)
				}
				b = append(b, enc.tmp.Bytes()...)
			default:
				b = append(b, raw...)
			}
		}
		b = append(b, '}')
		sep = true
	}
	// The release tombstone, the confirmation and the journal are rare:
	// written by encoding/json (the fast decoder gives up on them and the
	// standard one reads them).
	for _, f := range []struct {
		name string
		v    any
		set  bool
	}{
		{"released", e.Released, e.Released != nil},
		{"releaseConfirmed", e.ReleaseConfirmed, e.ReleaseConfirmed},
		{"pending", e.Pending, e.Pending != nil},
	} {
		if !f.set {
			continue
		}
		raw, err := json.Marshal(f.v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if sep {
			b = append(b, ',')
		}
		b = appendString(b, f.name)
		b = append(b, ':')
		b = append(b, raw...)
		sep = true
	}
	return append(b, '}'), nil
}

type keyed struct {
	k string
	e *Entry
}

// value writes a value as values.Value.MarshalJSON does,
// {"type":"bytes","value":"256Mi"} with structured values inline, except
// that a number whose printed form does not read back as the same value is
// written in a form that does ("300000000" for 300000000 bytes, which
// values prints as "286.1Mi"), and a value that cannot be written so that
// it reads back (values cannot parse 0 millicores) is an error: the shard
// is refused rather than written unreadable.
func (enc *encoder) value(b []byte, v values.Value) ([]byte, error) {
	switch t := v.Type(); t {
	case values.Invalid:
		return append(b, "null"...), nil
	case values.Structured:
		b = append(b, `{"type":"structured","value":`...)
		b = append(b, v.Str()...) // compact JSON: StructuredOf made it
		return append(b, '}'), nil
	case values.String:
		b = append(b, `{"type":"string","value":`...)
		b = appendString(b, v.Str())
		return append(b, '}'), nil
	}
	p, ok := enc.printed[v]
	if !ok {
		var err error
		if p, err = exactPrint(v); err != nil {
			return nil, err
		}
		if enc.printed == nil || len(enc.printed) >= 1<<12 {
			enc.printed = map[values.Value]string{}
		}
		enc.printed[v] = p
	}
	b = append(b, `{"type":`...)
	b = appendString(b, v.Type().String())
	b = append(b, `,"value":`...)
	b = appendString(b, p)
	return append(b, '}'), nil
}

// exactPrint is a printed form of a number that values.Parse reads back as
// the same value.
func exactPrint(v values.Value) (string, error) {
	t := v.Type()
	tries := []string{v.String()}
	switch t {
	case values.Bytes:
		tries = append(tries, strconv.FormatInt(v.Int(), 10))
	case values.Millicores:
		tries = append(tries, strconv.FormatInt(v.Int(), 10)+"m")
	}
	for _, s := range tries {
		if back, err := values.Parse(t, s); err == nil && back == v {
			return s, nil
		}
	}
	return "", fmt.Errorf("the %s value %s cannot be stored: it does not read back (values.Parse)", t, v)
}

// appendString writes s as a JSON string: plain ASCII as it is, anything
// else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainByte is the bytes a JSON string holds as they are (and
// encoding/json writes as they are).
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()
