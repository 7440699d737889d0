package state

import (
	"encoding/json"

	"github.com/setpoint-dev/setpoint/engine/values"
)

// The fast decoder reads shards exactly as the encoder writes them (key
// order, no spaces) with no reflection: encoding/json took about 15 µs a
// shard, 300 ms of CPU for 20,000. Anything else it meets (a file
// reformatted by hand, an escape it does not handle) makes it give up, and
// the shard is decoded by encoding/json instead, which is also what
// reports a shard that does not parse. TestFastDecoderAgrees checks the
// two agree.

// dec walks a byte slice; any surprise sets bad and every later step
// fails.
type dec struct {
	b   []byte
	i   int
	bad bool
	// keys interns attribute paths and policy names, which repeat from
	// shard to shard (nil: no interning).
	keys map[string]string
}

// key reads a string that is likely to repeat (attribute paths, policy
// names, type names, common values, spec names).
func (d *dec) key() string {
	if d.keys == nil || d.bad {
		return d.str()
	}
	start := d.i
	s := d.str()
	if d.bad {
		return ""
	}
	raw := d.b[start:d.i]
	if k, ok := d.keys[string(raw)]; ok {
		return k
	}
	if len(d.keys) < 1<<12 {
		d.keys[string(raw)] = s
	}
	return s
}

func (d *dec) fail() bool { d.bad = true; return false }

// lit consumes s.
func (d *dec) lit(s string) bool {
	if d.bad || len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return d.fail()
	}
	d.i += len(s)
	return true
}

// peek reports whether s comes next, consuming it if so.
func (d *dec) peek(s string) bool {
	if d.bad || len(d.b)-d.i < len(s) || string(d.b[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// str reads a JSON string: plain ASCII directly, anything else through
// encoding/json.
func (d *dec) str() string {
	if d.bad || d.i >= len(d.b) || d.b[d.i] != '"' {
		d.fail()
		return ""
	}
	start := d.i
	plain := true
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			if plain {
				return string(d.b[start+1 : j])
			}
			var s string
			if json.Unmarshal(d.b[start:d.i], &s) != nil {
				d.fail()
			}
			return s
		case c == '\\':
			plain = false
			j++
		case c < 0x20:
			d.fail()
			return ""
		case c >= 0x80:
			plain = false
		}
	}
	d.fail()
	return ""
}

// skipStr passes over a JSON string (json.Valid checks it after).
func (d *dec) skipStr() {
	for j := d.i + 1; j < len(d.b); j++ {
		switch d.b[j] {
		case '"':
			d.i = j + 1
			return
		case '\\':
			j++
		}
	}
	d.fail()
}

// raw returns the next JSON value's bytes (checked by json.Valid).
func (d *dec) raw() []byte {
	start, depth := d.i, 0
	for d.i < len(d.b) && !d.bad {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.skipStr()
		case c == '{' || c == '[':
			depth++
			d.i++
		case c == '}' || c == ']':
			if depth == 0 { // the enclosing container's end: a scalar ended
				return d.check(start)
			}
			depth--
			d.i++
		case c == ',' && depth == 0:
			return d.check(start)
		default:
			d.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return d.check(start)
		}
	}
	if depth == 0 && !d.bad {
		return d.check(start)
	}
	d.fail()
	return nil
}

func (d *dec) check(start int) []byte {
	r := d.b[start:d.i]
	if len(r) == 0 || !json.Valid(r) {
		d.fail()
		return nil
	}
	return r
}

// value reads what appendValue writes.
func (d *dec) value() values.Value {
	if d.peek("null") {
		return values.Value{}
	}
	d.lit(`{"type":`)
	t := typeNamed[d.key()]
	d.lit(`,"value":`)
	if d.bad || t == values.Invalid {
		d.fail()
		return values.Value{}
	}
	var v values.Value
	var err error
	if t == values.Structured {
		v, err = values.StructuredOf(d.raw())
	} else {
		v, err = values.Parse(t, d.key())
	}
	if err != nil || !d.lit("}") {
		d.fail()
		return values.Value{}
	}
	return v
}

// entry reads what encoder.entry writes.
func (d *dec) entry() *Entry {
	e := &Entry{}
	if !d.lit("{") {
		return nil
	}
	if d.peek("}") {
		return e
	}
	if d.peek(`"user":`) {
		v := d.value()
		e.User = &v
		if d.peek("}") {
			return e
		}
		d.lit(",")
	}
	if d.peek(`"applied":`) {
		a := &Applied{}
		d.lit(`{"value":`)
		a.Value = d.value()
		d.lit(`,"at":`)
		start := d.i
		d.str()
		if d.bad || a.At.UnmarshalJSON(d.b[start:d.i]) != nil {
			d.fail()
			return nil
		}
		if d.peek(`,"by":[`) {
			for !d.bad {
				a.By = append(a.By, d.key())
				if d.peek("]") {
					break
				}
				d.lit(",")
			}
		}
		d.lit("}")
		e.Applied = a
		if d.peek("}") {
			return e
		}
		d.lit(",")
	}
	if d.lit(`"policy":{`) {
		e.Policy = map[string]json.RawMessage{}
		for !d.bad {
			k := d.key()
			d.lit(":")
			r := d.raw()
			if d.bad {
				return nil
			}
			e.Policy[k] = append(json.RawMessage(nil), r...)
			if d.peek("}") {
				break
			}
			d.lit(",")
		}
	}
	if !d.lit("}") {
		return nil
	}
	return e
}

// typeNamed is each value type by its name (values.ParseType, without
// allocating); a type missing here makes the fast decoder give up.
var typeNamed = func() map[string]values.Type {
	m := map[string]values.Type{}
	for t := values.Type(1); t < 64; t++ {
		if u, err := values.ParseType(t.String()); err == nil && u == t {
			m[t.String()] = t
		}
	}
	return m
}()

// fastAttrs decodes a shard's attrs as the encoder writes them; ok is
// false when it gives up. keys, if not nil, interns keys across calls.
func fastAttrs(b []byte, keys map[string]string) (attrs map[string]*Entry, ok bool) {
	d := &dec{b: b, keys: keys}
	if !d.lit("{") {
		return nil, false
	}
	attrs = map[string]*Entry{}
	if d.peek("}") {
		return attrs, d.i == len(b)
	}
	for !d.bad {
		k := d.key()
		d.lit(":")
		e := d.entry()
		if d.bad {
			return nil, false
		}
		attrs[k] = e
		if d.peek("}") {
			break
		}
		d.lit(",")
	}
	return attrs, !d.bad && d.i == len(b)
}

// fastHeader reads a shard file as shardBytes writes it; ok is false when
// it gives up. Attrs is the rest of the file up to the closing brace,
// which the checksum then vouches for.
func fastHeader(b []byte) (f shardFile, ok bool) {
	d := &dec{b: b}
	d.lit(`{"version":`)
	n := 0
	for d.i < len(b) && b[d.i] >= '0' && b[d.i] <= '9' && n < 1<<20 {
		n = n*10 + int(b[d.i]-'0')
		d.i++
	}
	f.Version = n
	o := &objectJSON{}
	d.lit(`,"object":{"provider":`)
	o.Provider = d.str()
	d.lit(`,"kind":`)
	o.Kind = d.str()
	if d.peek(`,"namespace":`) {
		o.Namespace = d.str()
	}
	d.lit(`,"name":`)
	o.Name = d.str()
	d.lit(`},"checksum":`)
	f.Checksum = d.str()
	d.lit(`,"attrs":`)
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	if d.bad || end-1 <= d.i || b[end-1] != '}' {
		return f, false
	}
	f.Object = o
	f.Attrs = b[d.i : end-1]
	return f, true
}
