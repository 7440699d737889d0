package state

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// encoder serializes shards' attributes; its buffers are reused across
// shards.
type encoder struct{}

// attrs serializes an object's stored entries (the empty ones are not
// stored), or returns nil when none is.
func (enc *encoder) attrs(x *Object) ([]byte, error) {
	if x == nil {
		return nil, nil
	}
	stored := x.Attrs
	n := 0
	for k, e := range x.Attrs {
		if e.IsEmpty() {
			continue
		}
		n++
		if !utf8.ValidString(k) {
			return nil, fmt.Errorf("attribute %q: not valid UTF-8", k)
		}
		for p, raw := range e.Policy {
			if !json.Valid(raw) {
				return nil, fmt.Errorf("attribute %s: policy %q: not valid JSON", k, p)
			}
		}
	}
	if n == 0 {
		return nil, nil
	}
	if n < len(x.Attrs) {
		stored = make(map[string]*Entry, n)
		for k, e := range x.Attrs {
			if !e.IsEmpty() {
				stored[k] = e
			}
		}
	}
	b, err := json.Marshal(stored)
	if err != nil {
		return nil, err
	}
	return b, nil
}
