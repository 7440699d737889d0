package state

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/values"
)

// FuzzShard: whatever a shard file holds, Load never panics and either
// refuses the shard (naming it) or reads a state that saves and loads
// back the same; and the fast attribute decoder never accepts what the
// standard decoding refuses, nor decodes differently.
func FuzzShard(f *testing.F) {
	s := New()
	s.Entry(at(checkout, "spec.replicas")).User = ptr(values.CountOf(3))
	s.Entry(at(checkout, `metadata.annotations["a/b"]`)).Applied = &Applied{Value: values.StringOf("x\"y"), At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), By: []string{"NFR/shop/checkout"}}
	s.Entry(at(checkout, "spec.template.spec.containers[name=app].resources.limits.memory")).Policy = map[string]json.RawMessage{"nfr": json.RawMessage(`{"openedAt":"2026-01-01T00:00:00Z"}`)}
	dir := f.TempDir()
	b := NewFile(filepath.Join(dir, "state.json")).(*fileBackend)
	if _, err := b.Save(ctx, s); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(b.dir, shardName(checkout)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"version":2,"object":{"provider":"kubernetes","kind":"Deployment","namespace":"shop","name":"checkout"},"checksum":"","attrs":{}}`))
	f.Add([]byte(`{"version":2,"attrs":{"x":null}}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		// The attrs decoders agree.
		var head shardFile
		if json.Unmarshal(data, &head) == nil && len(head.Attrs) > 0 {
			fast, ok := fastAttrs(head.Attrs, map[string]string{})
			var slow map[string]*Entry
			slowErr := json.Unmarshal(head.Attrs, &slow)
			if ok && slowErr != nil {
				t.Fatalf("the fast decoder accepted attrs the standard one refuses (%v): %s", slowErr, head.Attrs)
			}
			if ok {
				a, _ := json.Marshal(fast)
				b, _ := json.Marshal(slow)
				if string(a) != string(b) {
					t.Fatalf("decoders differ:\nfast %s\nslow %s", a, b)
				}
			}
		}

		b := NewFile(filepath.Join(t.TempDir(), "state.json")).(*fileBackend)
		if err := os.MkdirAll(b.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.dir, shardName(checkout)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := b.Load(ctx)
		if err != nil {
			if st == nil || len(st.Objects()) != 0 {
				t.Fatalf("a refused shard must leave an empty, usable state: %v", err)
			}
			return
		}
		b2 := NewFile(filepath.Join(t.TempDir(), "state.json"))
		if _, err := b2.Save(ctx, st); err != nil {
			return // refused on save (an invalid value): never written half
		}
		back, err := b2.Load(ctx)
		if err != nil {
			t.Fatalf("a saved state does not load: %v", err)
		}
		for _, o := range st.Objects() {
			x, _ := st.Object(o)
			y, _ := back.Object(o)
			for k, e := range x.Attrs {
				if e.IsEmpty() {
					continue // not stored, by design
				}
				if y == nil || y.Attrs[k] == nil {
					t.Fatalf("%v %s lost across a save", o, k)
				}
				sameEntry(t, k, e, y.Attrs[k])
			}
		}
	})
}
