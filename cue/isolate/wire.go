package isolate

import (
	"encoding/json"
	"fmt"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// request is what the parent writes on the child's stdin, once the child
// is inside its cgroup: reading it is the child's go-ahead.
type request struct {
	Files   []string     `json:"files"`
	Options load.Options `json:"options"`
	// Memory is the heap watchdog's bound in bytes (0: none).
	Memory int64 `json:"memory"`
}

// message is one line the child writes on stdout, exactly one field set.
// Per file: Start before evaluating it (so that a breach is blamed on the
// right file), then its documents and diagnostics, then Done.
type message struct {
	Start string           `json:"start,omitempty"`
	Doc   *wireDoc         `json:"doc,omitempty"`
	Diag  *load.Diagnostic `json:"diag,omitempty"`
	Done  string           `json:"done,omitempty"`
}

// wireDoc is a decoded document in transit: the JSON the loader decoded it
// from (bytes, so that not even the spacing of a raw provider config can
// change) and its Source, which the JSON does not carry.
type wireDoc struct {
	Kind   string          `json:"kind"`
	JSON   []byte          `json:"json"`
	Pos    spec.Pos        `json:"pos"`
	Fields []spec.FieldPos `json:"fields"`
}

func encodeDoc(d spec.Document, canon []byte) *wireDoc {
	src := d.Head().Src
	return &wireDoc{Kind: d.Head().Kind, JSON: canon, Pos: src.Pos, Fields: src.Fields()}
}

// decode rebuilds the document as the loader built it: the same JSON into
// the same zero value, then the Source. Field paths are interned through
// paths, as the loader interns them, since a directory repeats the same few.
func (w *wireDoc) decode(paths map[string]string) (spec.Document, error) {
	k, ok := spec.Lookup(w.Kind)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q", w.Kind)
	}
	d := k.New()
	if err := json.Unmarshal(w.JSON, d); err != nil {
		return nil, fmt.Errorf("decoding a %s document: %w", w.Kind, err)
	}
	for i, f := range w.Fields {
		if s, ok := paths[f.Path]; ok {
			w.Fields[i].Path = s
		} else {
			paths[f.Path] = f.Path
		}
	}
	d.Head().Src = spec.NewSource(w.Pos, w.Fields)
	return d, nil
}
