package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

var ctx = context.Background()

func newBackend(t *testing.T) *fileBackend {
	t.Helper()
	return NewFile(filepath.Join(t.TempDir(), ".setpoint", "state.json")).(*fileBackend)
}

var (
	checkout = addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: "shop", Name: "checkout"}
	fib      = addrs.Object{Provider: "kubernetes", Kind: "KnativeService", Namespace: "default", Name: "fib"}
	eu1      = addrs.Object{Provider: "sim", Kind: "Cluster", Name: "eu-1"} // cluster-scoped
)

func at(o addrs.Object, path string) addrs.Attr {
	return addrs.Attr{Object: o, Path: addrs.MustPath(path)}
}

func mustStructured(t *testing.T, s string) values.Value {
	t.Helper()
	v, err := values.StructuredOf([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ptr[T any](v T) *T { return &v }

func save(t *testing.T, b Backend, s *State) SaveStats {
	t.Helper()
	st, err := b.Save(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func load(t *testing.T, b Backend) *State {
	t.Helper()
	s, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameEntry compares entries as they mean: times by instant, policy
// values as compact JSON.
func sameEntry(t *testing.T, what string, want, got *Entry) {
	t.Helper()
	if (want.User == nil) != (got.User == nil) || want.User != nil && *want.User != *got.User {
		t.Errorf("%s: user %v, want %v", what, got.User, want.User)
	}
	switch {
	case (want.Applied == nil) != (got.Applied == nil):
		t.Errorf("%s: applied %+v, want %+v", what, got.Applied, want.Applied)
	case want.Applied != nil:
		w, g := want.Applied, got.Applied
		if w.Value != g.Value || !w.At.Equal(g.At) || !slices.Equal(w.By, g.By) {
			t.Errorf("%s: applied %+v, want %+v", what, g, w)
		}
	}
	if len(want.Policy) != len(got.Policy) {
		t.Errorf("%s: policy %s, want %s", what, got.Policy, want.Policy)
	}
	for k, w := range want.Policy {
		var cw, cg bytes.Buffer
		_ = json.Compact(&cw, w)
		_ = json.Compact(&cg, got.Policy[k])
		if cw.String() != cg.String() {
			t.Errorf("%s: policy %s = %s, want %s", what, k, cg.String(), cw.String())
		}
	}
	// The tombstone, the confirmation and the journal: by what they mean
	// (times by instant).
	if want.ReleaseConfirmed != got.ReleaseConfirmed {
		t.Errorf("%s: releaseConfirmed %v, want %v", what, got.ReleaseConfirmed, want.ReleaseConfirmed)
	}
	switch w, g := want.Released, got.Released; {
	case (w == nil) != (g == nil):
		t.Errorf("%s: released %+v, want %+v", what, g, w)
	case w != nil:
		if w.Value != g.Value || !w.At.Equal(g.At) || !slices.Equal(w.By, g.By) || w.Confirmed != g.Confirmed ||
			(w.User == nil) != (g.User == nil) || w.User != nil && *w.User != *g.User {
			t.Errorf("%s: released %+v, want %+v", what, g, w)
		}
	}
	switch w, g := want.Pending, got.Pending; {
	case (w == nil) != (g == nil):
		t.Errorf("%s: pending %+v, want %+v", what, g, w)
	case w != nil:
		if w.Action != g.Action || w.Value != g.Value || !w.At.Equal(g.At) || !slices.Equal(w.By, g.By) || !maps.Equal(w.Create, g.Create) {
			t.Errorf("%s: pending %+v, want %+v", what, g, w)
		}
	}
}

// everyValue is a value of every type, with the awkward cases.
func everyValue(t *testing.T) []values.Value {
	return []values.Value{
		values.CountOf(0), values.CountOf(3), values.CountOf(-7), values.CountOf(1 << 62),
		values.BytesOf(0), values.BytesOf(256 << 20), values.BytesOf(1000), values.BytesOf(3 << 30),
		values.BytesOf(300000000), // values prints 286.1Mi, which reads back as 299997594
		values.MillicoresOf(500), values.MillicoresOf(2000), values.MillicoresOf(1), values.MillicoresOf(1234567),
		values.DurationOf(30 * time.Second), values.DurationOf(1500 * time.Millisecond), values.DurationOf(0), values.DurationOf(-time.Nanosecond),
		values.StringOf(""), values.StringOf("plain"), values.StringOf("quote \" backslash \\ <tag> & ü 🙂\n\t\x01"),
		mustStructured(t, `{"a":[1,2,{"b":"<x>"}],"c":null}`), mustStructured(t, `[ 1, "two" ]`),
	}
}

// unstorable were values whose printed form values.Parse once rejected or
// read back differently.
var unstorable = []values.Value{values.BytesOf(-(64 << 20)), values.MillicoresOf(0), values.MillicoresOf(-5), values.BytesOf(300000000)}

// viaValuesJSON is what values' own JSON gives back for v.
func viaValuesJSON(t *testing.T, v values.Value) values.Value {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back values.Value
	if err := json.Unmarshal(b, &back); err != nil {
		t.Logf("values' own JSON cannot read back %s %q (%s): %v", v.Type(), v, b, err)
		return values.Value{}
	}
	return back
}

func TestRoundTripEveryValueType(t *testing.T) {
	b := newBackend(t)
	s := New()
	want := map[addrs.Attr]*Entry{}
	zones := []*time.Location{time.FixedZone("CET", 3600), time.FixedZone("LMT", 3600+15*60+7)} // RFC 3339 has no seconds in an offset
	for i, v := range everyValue(t) {
		a := at([]addrs.Object{checkout, fib, eu1}[i%3], fmt.Sprintf(`metadata.annotations["k/%d \"q\""].x[name=c%d]`, i, i))
		e := s.Entry(a)
		e.User = ptr(v)
		e.Applied = &Applied{Value: v, At: time.Date(2026, 3, 1, 12, 0, i, 123456789, zones[i%2]), By: []string{"NFR/shop/checkout", "Schedule/shop/ü"}}
		e.Policy = map[string]json.RawMessage{
			"nfr":      json.RawMessage(`{ "window": {"openedAt": "2026-03-01T12:00:00Z", "anchor": 3},` + "\n" + ` "note": "<&>" }`),
			"schedule": json.RawMessage(`[1,2,3]`),
		}
		if got := viaValuesJSON(t, v); got != v {
			t.Logf("note: values' own JSON does not round-trip %s %q (%d): it gives %q (%d); the state keeps it exactly", v.Type(), v, v.Int(), got, got.Int())
		}
		want[a] = &Entry{User: ptr(v), Applied: &Applied{Value: v, At: e.Applied.At, By: e.Applied.By}, Policy: e.Policy}
	}
	s.Entry(at(eu1, "spec.nodes")) // empty: not stored
	st := save(t, b, s)
	if st.Written != 3 || st.Removed != 0 {
		t.Fatalf("saved %+v, want 3 shards written", st)
	}
	if st := save(t, b, s); st != (SaveStats{}) {
		t.Fatalf("a second Save with nothing changed did %+v", st)
	}
	for _, be := range []Backend{b, NewFile(b.path)} { // the same backend, and a fresh one
		back := load(t, be)
		if got := back.Objects(); !slices.Equal(got, []addrs.Object{checkout, fib, eu1}) {
			t.Fatalf("objects %v", got)
		}
		for a, w := range want {
			g, ok := back.Lookup(a)
			if !ok {
				t.Fatalf("%s lost", a)
			}
			sameEntry(t, a.String(), w, g)
		}
		if _, ok := back.Lookup(at(eu1, "spec.nodes")); ok {
			t.Error("an empty entry was stored")
		}
		if st := save(t, be, back); st != (SaveStats{}) {
			t.Fatalf("Save after Load with nothing changed did %+v", st)
		}
	}
}

// TestEdgeValuesRoundTrip: zero and negative quantities, and bytes that
// are no multiple of a unit, are stored and read back exactly.
func TestEdgeValuesRoundTrip(t *testing.T) {
	for _, v := range unstorable {
		b := newBackend(t)
		s := New()
		fillObject(s, 1, 0)
		s.Entry(at(checkout, "spec.x")).User = ptr(v)
		if _, err := b.Save(ctx, s); err != nil {
			t.Fatalf("%s %s: %v", v.Type(), v, err)
		}
		back, err := b.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := back.Lookup(at(checkout, "spec.x")); !ok || *e.User != v {
			t.Fatalf("%s %s came back as %+v", v.Type(), v, e)
		}
	}
}

// TestEncoderMatchesEncodingJSON keeps the hand-written encoder in step
// with the types: it must write what encoding/json writes.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	// A field added to Entry or Applied must be encoded (encoder.entry),
	// decoded (dec.entry) and compared (sameEntry, the entries below).
	if got := fieldNames(Entry{}); !slices.Equal(got, []string{"User", "Applied", "Policy", "Released", "ReleaseConfirmed", "Pending"}) {
		t.Fatalf("Entry's fields are %v: teach encode.go and decode.go the new ones, then update this test", got)
	}
	if got := fieldNames(Applied{}); !slices.Equal(got, []string{"Value", "At", "By"}) {
		t.Fatalf("Applied's fields are %v: teach encode.go and decode.go the new ones, then update this test", got)
	}
	for i, v := range everyValue(t) {
		x := &Object{Attrs: map[string]*Entry{
			"spec.replicas":               {User: ptr(v)},
			`metadata.annotations["a/b"]`: {Applied: &Applied{Value: v, At: time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)}},
			"z":                           {User: ptr(v), Applied: &Applied{Value: v, By: []string{"a", "<b>"}}, Policy: map[string]json.RawMessage{"b": json.RawMessage(`{"x":[1,"<"]}`), "a": json.RawMessage(`null`)}},
			"p":                           {Policy: map[string]json.RawMessage{"nfr": json.RawMessage(`3`)}},
		}}
		var enc encoder
		mine, err := enc.attrs(x, true)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := json.Marshal(x.Attrs)
		if err != nil {
			t.Fatal(err)
		}
		// encoding/json escapes <, > and & inside structured values and
		// policy JSON; the encoder leaves them.
		var m bytes.Buffer
		json.HTMLEscape(&m, mine)
		if m.String() != string(theirs) && viaValuesJSON(t, v) == v {
			t.Fatalf("%s %q:\nencoder:       %s\nencoding/json: %s", v.Type(), v, mine, theirs)
		}
		// What Load decodes encodes to the same bytes: an unchanged shard
		// hashes as it did when loaded.
		back, ok := fastAttrs(mine, nil)
		if !ok {
			t.Fatalf("the fast decoder gave up on %s", mine)
		}
		if got := *back["spec.replicas"].User; got != v {
			t.Fatalf("%s %s read back as %s", v.Type(), v, got)
		}
		again, _ := (&encoder{}).attrs(&Object{Attrs: back}, true)
		if !bytes.Equal(again, mine) {
			t.Fatalf("re-encoding a decoded shard changed it:\n%s\n%s", mine, again)
		}
	}
}

// TestRareFieldsRoundTrip: the release tombstone, its confirmation and
// the journal are written as encoding/json writes them, read back by the
// standard decoder (the fast one gives up on them), and re-encode to the
// same bytes, so an unchanged shard is not rewritten.
func TestRareFieldsRoundTrip(t *testing.T) {
	u := values.CountOf(2)
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	x := &Object{Attrs: map[string]*Entry{
		"spec.minReplicas": {Released: &Released{Value: values.CountOf(4), User: &u, By: []string{"NFR/shop/a"}, At: when}},
		"spec.replicas":    {User: &u, Applied: &Applied{Value: u, At: when, By: []string{"x"}}, ReleaseConfirmed: true, Pending: &Pending{Action: IntentApply, Value: values.CountOf(3), By: []string{"x"}, At: when, Create: map[string]values.Value{"a": u}}},
	}}
	mine, err := (&encoder{}).attrs(x, true)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _ := json.Marshal(x.Attrs)
	if string(mine) != string(theirs) {
		t.Fatalf("encoder:       %s\nencoding/json: %s", mine, theirs)
	}
	if _, ok := fastAttrs(mine, nil); ok {
		t.Fatal("the fast decoder must give up on fields it does not know")
	}
	var back map[string]*Entry
	if err := json.Unmarshal(mine, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := (&encoder{}).attrs(&Object{Attrs: back}, true)
	if !bytes.Equal(again, mine) {
		t.Fatalf("re-encoding changed it:\n%s\n%s", mine, again)
	}
	b := newBackend(t)
	s := New()
	for k, e := range x.Attrs {
		*s.Entry(at(checkout, k)) = *e
	}
	if _, err := b.Save(ctx, s); err != nil {
		t.Fatal(err)
	}
	loaded, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range x.Attrs {
		got, ok := loaded.Lookup(at(checkout, k))
		if !ok {
			t.Fatalf("%s lost in a reload", k)
		}
		sameEntry(t, k+" after a reload", e, got)
	}
}

func fieldNames(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		out = append(out, rt.Field(i).Name)
	}
	return out
}

// TestFastDecoderAgrees: the fast decoder gives what encoding/json gives,
// and gives up (for encoding/json to take over) on what it does not know.
func TestFastDecoderAgrees(t *testing.T) {
	s := New()
	for i := range 50 {
		fillObject(s, i, i)
	}
	for i, v := range everyValue(t) {
		e := s.Entry(at(eu1, fmt.Sprintf("x%d", i)))
		e.User = ptr(v)
		e.Applied = &Applied{Value: v, At: time.Unix(int64(i), int64(i)), By: []string{`"q"`}}
		e.Policy = map[string]json.RawMessage{
			"p": json.RawMessage(`{"s":"\u00fc\"","n":-1.5e3,"t":true,"l":[[],{}]}`),
			"q": json.RawMessage(`{"s":"}],{\"x\":[","t":"\\"}`), // brackets and quotes inside strings
			"r": json.RawMessage(`"a,b}"`),                       // a string at the top, with a comma
			"s": json.RawMessage(`-0.5`),
		}
	}
	var enc encoder
	for _, o := range s.Objects() {
		attrs, err := enc.attrs(s.objects[o], true)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := fastAttrs(attrs, map[string]string{})
		if !ok {
			t.Fatalf("%s: the fast decoder gave up on %s", o, attrs)
		}
		var slow map[string]*Entry
		if err := json.Unmarshal(attrs, &slow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: fast %#v, encoding/json %#v", o, fast, slow)
		}
		var sf shardFile
		file := shardBytes(o, [32]byte{1}, attrs)
		hdr, ok := fastHeader(file)
		if err := json.Unmarshal(file, &sf); err != nil || !ok || !reflect.DeepEqual(hdr, sf) {
			t.Fatalf("%s: header fast %+v %v, encoding/json %+v %v", o, hdr, ok, sf, err)
		}
	}
	for _, in := range []string{`{ "a":{}}`, `{"a":{"user":{"type":"count","value":"1"} }}`, `{"a":{"applied":{"at":"2026-01-01T00:00:00Z","value":null}}}`, `{"a":{"extra":1}}`, `{"a":{}}x`, `{"a":{"policy":{"p":[1,}}}`} {
		if _, ok := fastAttrs([]byte(in), nil); ok {
			t.Errorf("the fast decoder took %s", in)
		}
	}
	// A reformatted shard file is still read (the slow way).
	b := newBackend(t)
	x := New()
	fillObject(x, 1, 1)
	save(t, b, x)
	name := filepath.Join(b.dir, shardName(benchObject(1)))
	raw, _ := os.ReadFile(name)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, pretty.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back := load(t, b)
	sameEntry(t, "reformatted", x.objects[benchObject(1)].Attrs[benchReplicas.String()], back.objects[benchObject(1)].Attrs[benchReplicas.String()])
}

// shardFiles maps each shard file's name to its FileInfo.
func shardFiles(t *testing.T, b *fileBackend) map[string]fs.FileInfo {
	t.Helper()
	ents, err := os.ReadDir(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fs.FileInfo{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi
	}
	return out
}

// rewritten lists the files replaced (a new inode: writes rename) or
// added since before.
func rewritten(before, after map[string]fs.FileInfo) []string {
	var out []string
	for n, a := range after {
		if b, ok := before[n]; !ok || !os.SameFile(a, b) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func TestOnlyChangedShardsAreWritten(t *testing.T) {
	b := newBackend(t)
	s := New()
	for i := range 50 {
		fillObject(s, i, 0)
	}
	if st := save(t, b, s); st.Written != 50 {
		t.Fatalf("first save %+v", st)
	}
	s = load(t, b)
	before := shardFiles(t, b)
	if st := save(t, b, s); st != (SaveStats{}) {
		t.Fatalf("nothing changed, yet %+v", st)
	}
	// Setting what is already there changes nothing.
	e, _ := s.Lookup(addrs.Attr{Object: benchObject(4), Path: benchReplicas})
	e.User = ptr(values.CountOf(2))
	if st := save(t, b, s); st != (SaveStats{}) {
		t.Fatalf("an unchanged value, yet %+v", st)
	}
	if got := rewritten(before, shardFiles(t, b)); len(got) != 0 {
		t.Fatalf("rewritten with nothing changed: %v", got)
	}
	// Three changes, each in place with no call to mark it: a value, a
	// policy's bytes, a spec appended to By.
	e, _ = s.Lookup(addrs.Attr{Object: benchObject(3), Path: benchMemory})
	e.Applied.Value = values.BytesOf(208 << 20)
	e, _ = s.Lookup(addrs.Attr{Object: benchObject(17), Path: benchReplicas})
	copy(e.Policy["nfr"][bytes.IndexByte(e.Policy["nfr"], '2'):], "3") // a digit of a date
	e, _ = s.Lookup(addrs.Attr{Object: benchObject(42), Path: benchMemory})
	e.Applied.By = append(e.Applied.By, "NFR/x/y")
	st := save(t, b, s)
	if st.Written != 3 || st.Removed != 0 {
		t.Fatalf("three changed, saved %+v", st)
	}
	want := []string{shardName(benchObject(3)), shardName(benchObject(17)), shardName(benchObject(42))}
	slices.Sort(want)
	if got := rewritten(before, shardFiles(t, b)); !slices.Equal(got, want) {
		t.Fatalf("rewritten %v, want %v", got, want)
	}
	back := load(t, b)
	e, _ = back.Lookup(addrs.Attr{Object: benchObject(42), Path: benchMemory})
	if !slices.Equal(e.Applied.By, []string{"NFR/team-042/service-00042", "NFR/x/y"}) {
		t.Fatalf("by %v", e.Applied.By)
	}
}

func TestEmptiedShardIsRemoved(t *testing.T) {
	b := newBackend(t)
	s := New()
	fillObject(s, 1, 0)
	fillObject(s, 2, 0)
	save(t, b, s)
	s = load(t, b)
	s.Delete(addrs.Attr{Object: benchObject(1), Path: benchReplicas})
	if st := save(t, b, s); st != (SaveStats{Written: 1}) {
		t.Fatalf("one attribute of two deleted: %+v", st)
	}
	s.Delete(addrs.Attr{Object: benchObject(1), Path: benchMemory})
	if _, ok := s.Object(benchObject(1)); ok {
		t.Fatal("an object with no attribute is still listed")
	}
	if st := save(t, b, s); st != (SaveStats{Removed: 1}) {
		t.Fatalf("last attribute deleted: %+v", st)
	}
	// Entries emptied in place: the shard goes too.
	for _, p := range []addrs.Path{benchReplicas, benchMemory} {
		e, _ := s.Lookup(addrs.Attr{Object: benchObject(2), Path: p})
		*e = Entry{}
	}
	if st := save(t, b, s); st != (SaveStats{Removed: 1}) {
		t.Fatalf("entries emptied: %+v", st)
	}
	if files := shardFiles(t, b); len(files) != 0 {
		t.Fatalf("left behind: %v", files)
	}
	if back := load(t, b); len(back.Objects()) != 0 {
		t.Fatalf("loaded %v", back.Objects())
	}
	if st := save(t, b, s); st != (SaveStats{}) {
		t.Fatalf("removed again: %+v", st)
	}
}

func TestCorruptShardIsReportedAndLeftAlone(t *testing.T) {
	b := newBackend(t)
	s := New()
	for i := range 3 {
		fillObject(s, i, 0)
	}
	save(t, b, s)
	tampered := filepath.Join(b.dir, shardName(benchObject(0)))
	garbage := filepath.Join(b.dir, shardName(benchObject(1)))
	raw, _ := os.ReadFile(tampered)
	bad := bytes.Replace(raw, []byte(`"256Mi"`), []byte(`"512Mi"`), 1)
	if bytes.Equal(bad, raw) {
		t.Fatal("nothing to tamper with")
	}
	must(t, os.WriteFile(tampered, bad, 0o600))
	must(t, os.WriteFile(garbage, []byte("{not json"), 0o600))

	got, err := b.Load(ctx)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt shards: %v", err)
	}
	for _, want := range []string{tampered, garbage, "checksum", benchObject(0).String(), "does not parse", "left as it is"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	var le *LoadError
	if !errors.As(err, &le) || len(le.Shards) != 2 {
		t.Fatalf("want a LoadError of 2 shards: %v", err)
	}
	// The readable shard is there; the others are absent, not reset.
	if got == nil || !slices.Equal(got.Objects(), []addrs.Object{benchObject(2)}) {
		t.Fatalf("with the corrupt ones, Load returned %v", got)
	}
	// Writing those objects again does not overwrite their shards.
	fillObject(got, 0, 5)
	fillObject(got, 1, 5)
	fillObject(got, 2, 5)
	st, err := b.Save(ctx, got)
	if st.Written != 1 || err == nil || !strings.Contains(err.Error(), "not overwritten") || !strings.Contains(err.Error(), tampered) || !strings.Contains(err.Error(), garbage) {
		t.Fatalf("Save over corrupt shards: %+v %v", st, err)
	}
	if after, _ := os.ReadFile(tampered); !bytes.Equal(after, bad) {
		t.Error("the tampered shard was changed")
	}
	if after, _ := os.ReadFile(garbage); string(after) != "{not json" {
		t.Error("the garbage shard was changed")
	}
	// A shard from a newer release is refused the same way.
	must(t, os.WriteFile(garbage, bytes.Replace(raw, []byte(`{"version":2,`), []byte(`{"version":3,`), 1), 0o600))
	if _, err := b.Load(ctx); !errors.Is(err, ErrOldFormat) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("a newer shard: %v", err)
	}
	// A shard copied to another object's name is caught.
	must(t, os.Remove(tampered))
	must(t, os.WriteFile(garbage, raw, 0o600))
	if _, err := b.Load(ctx); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "whose file is") {
		t.Fatalf("a misplaced shard: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOldSingleFileIsReported(t *testing.T) {
	b := newBackend(t)
	must(t, os.MkdirAll(filepath.Dir(b.path), 0o755))
	v1 := `{
  "version": 1,
  "checksum": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
  "entries": {}
}
`
	must(t, os.WriteFile(b.path, []byte(v1), 0o600))
	_, err := b.Load(ctx)
	if !errors.Is(err, ErrOldFormat) {
		t.Fatalf("v1 state: %v", err)
	}
	for _, want := range []string{b.path, "earlier", "Move the old file aside", "mv "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	s := New()
	fillObject(s, 1, 0)
	if _, err := b.Save(ctx, s); !errors.Is(err, ErrOldFormat) {
		t.Fatalf("Save beside a v1 state: %v", err)
	}
	if got, _ := os.ReadFile(b.path); string(got) != v1 {
		t.Fatal("the v1 file was changed")
	}
	if _, err := os.Stat(b.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("shards were written beside a v1 state")
	}
	// Moved aside, all is well.
	must(t, os.Rename(b.path, b.path+".v1"))
	save(t, b, s)
	if got := load(t, b).Objects(); len(got) != 1 {
		t.Fatalf("after moving it aside: %v", got)
	}
}

func TestLockExcludesNamesHolderAndWaits(t *testing.T) {
	b := newBackend(t)
	unlock, err := b.Lock(ctx, "setpoint apply", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewFile(b.path).Lock(ctx, "setpoint plan", false)
	host, _ := os.Hostname()
	var le *LockedError
	if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Holder == nil {
		t.Fatalf("second lock: %v", err)
	}
	if h := le.Holder; h.PID != os.Getpid() || h.Host != host || h.Who != "setpoint apply" || time.Since(h.Since) > time.Minute {
		t.Fatalf("holder %+v", h)
	}
	for _, want := range []string{fmt.Sprintf("pid %d", os.Getpid()), host, "(setpoint apply)", "since 20"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}

	// A waiter returns only once the holder has unlocked.
	waiter := NewFile(b.path).(*fileBackend)
	waiting := make(chan struct{})
	var once sync.Once
	waiter.onWait = func() { once.Do(func() { close(waiting) }) }
	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		u, err := waiter.Lock(ctx, "setpoint watch", true)
		if err == nil {
			if !released.Load() {
				err = errors.New("the waiter got the lock while it was held")
			}
			if uerr := u(); err == nil {
				err = uerr
			}
		}
		got <- err
	}()
	select {
	case <-waiting: // it found the lock held and is waiting
	case err := <-got:
		t.Fatalf("the waiter returned without waiting: %v", err)
	}
	released.Store(true)
	must(t, unlock())
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	must(t, unlock()) // a second unlock does nothing

	// A waiter that runs out of time says who held it.
	unlock, err = b.Lock(ctx, "holder", false)
	must(t, err)
	defer unlock()
	cctx, cancel := context.WithCancel(ctx)
	late := NewFile(b.path).(*fileBackend)
	late.onWait = cancel
	if _, err := late.Lock(cctx, "late", true); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "gave up waiting") || !strings.Contains(err.Error(), "(holder)") {
		t.Fatalf("gave up: %v", err)
	}
}

// TestConcurrentUpdatesAreNotLost: lock → load → modify → save from two
// goroutines (two backends, as two processes would have) loses nothing.
func TestConcurrentUpdatesAreNotLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	counter := at(checkout, "spec.minReplicas")
	const perWorker = 25
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		b := NewFile(path)
		wg.Go(func() {
			for range perWorker {
				unlock, err := b.Lock(ctx, fmt.Sprintf("worker %d", w), true)
				if err != nil {
					errs <- err
					return
				}
				s, err := b.Load(ctx)
				if err == nil {
					e := s.Entry(counter)
					n := int64(0)
					if e.Applied != nil {
						n = e.Applied.Value.Int()
					}
					e.Applied = &Applied{Value: values.CountOf(n + 1), At: time.Now()}
					_, err = b.Save(ctx, s)
				}
				if uerr := unlock(); err == nil {
					err = uerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	e, ok := load(t, NewFile(path)).Lookup(counter)
	if !ok || e.Applied.Value.Int() != 2*perWorker {
		t.Fatalf("counted %v, want %d: updates were lost", e.Applied.Value, 2*perWorker)
	}
}

func TestAddressesCannotEscapeOrCollide(t *testing.T) {
	root := t.TempDir()
	b := NewFile(filepath.Join(root, "work", ".setpoint", "state.json")).(*fileBackend)
	objs := []addrs.Object{
		{Provider: "sim", Kind: "Deployment", Namespace: "../../x", Name: "y"},
		{Provider: "sim", Kind: "Deployment", Namespace: "..", Name: ".."},
		{Provider: "..", Kind: "..", Name: "../../../../etc/passwd"},
		{Provider: "/abs", Kind: "K", Name: "/tmp/x"},
		{Provider: "p", Kind: "K", Name: "a/b"}, // prints as p:K/a/b, as the next one does
		{Provider: "p", Kind: "K", Namespace: "a", Name: "b"},
		{Provider: "p", Kind: "Ka", Name: "b"}, // its parts run together as the last one's do
		// The same, past the readable part of the file name.
		{Provider: strings.Repeat("p", 80), Kind: "K", Namespace: "a", Name: "b"},
		{Provider: strings.Repeat("p", 80), Kind: "Ka", Name: "b"},
		{Provider: "p", Kind: "K", Name: "nul\x00byte"},
		{Provider: "p", Kind: "K", Name: strings.Repeat("long", 200)},
		{Provider: ".hidden", Kind: "K", Name: "x"},
		{Provider: "p", Kind: "K", Name: `back\slash"quote`},
		{Provider: "p", Kind: "K", Name: "Dépôt 🙂"},
		{Provider: "P", Kind: "k", Name: "A"}, // case only
		{Provider: "p", Kind: "K", Name: "a"},
	}
	s := New()
	for i, o := range objs {
		s.Entry(addrs.Attr{Object: o, Path: benchReplicas}).User = ptr(values.CountOf(int64(i)))
	}
	if st := save(t, b, s); st.Written != len(objs) {
		t.Fatalf("saved %+v", st)
	}
	// Only the state and its lock exist under root.
	var outside []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if filepath.Dir(p) != b.dir {
			outside = append(outside, p)
		}
		if strings.HasPrefix(d.Name(), ".") || len(d.Name()) > 255 {
			t.Errorf("shard file name %q", d.Name())
		}
		return nil
	})
	must(t, err)
	if len(outside) > 0 {
		t.Fatalf("written outside %s: %v", b.dir, outside)
	}
	if files := shardFiles(t, b); len(files) != len(objs) {
		t.Fatalf("%d files for %d objects", len(files), len(objs))
	}
	back := load(t, b)
	if got := back.Objects(); len(got) != len(objs) {
		t.Fatalf("loaded %v", got)
	}
	for i, o := range objs {
		e, ok := back.Lookup(addrs.Attr{Object: o, Path: benchReplicas})
		if !ok || e.User.Int() != int64(i) {
			t.Errorf("%q: %v %v", o, e, ok)
		}
	}
	// An address that is not UTF-8 would not come back as it was: refused.
	bad := New()
	bad.Entry(addrs.Attr{Object: addrs.Object{Provider: "p", Kind: "K", Name: "\xff"}, Path: benchReplicas}).User = ptr(values.CountOf(1))
	if _, err := b.Save(ctx, bad); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("a non-UTF-8 address: %v", err)
	}
}

func TestShardOverMaxIsRefused(t *testing.T) {
	b := newBackend(t)
	s := New()
	fillObject(s, 1, 0)
	big := s.Entry(at(checkout, "spec.minReplicas"))
	big.Policy = map[string]json.RawMessage{"runaway": json.RawMessage(`"` + strings.Repeat("x", MaxShard) + `"`)}
	st, err := b.Save(ctx, s)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), checkout.String()) || st.Written != 1 {
		t.Fatalf("an oversized shard: %+v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(b.dir, shardName(checkout))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the oversized shard was written")
	}
	if got := load(t, b).Objects(); !slices.Equal(got, []addrs.Object{benchObject(1)}) {
		t.Fatalf("loaded %v", got)
	}
	// Once the policy behaves, it is written.
	big.Policy["runaway"] = json.RawMessage(`"small"`)
	if st := save(t, b, s); st != (SaveStats{Written: 1}) {
		t.Fatalf("after shrinking: %+v", st)
	}
	// Invalid policy JSON is refused, naming the policy.
	big.Policy["runaway"] = json.RawMessage(`{oops`)
	if _, err := b.Save(ctx, s); err == nil || !strings.Contains(err.Error(), `"runaway"`) || !strings.Contains(err.Error(), checkout.String()) {
		t.Fatalf("invalid policy JSON: %v", err)
	}
}

func TestLookupObjectsDelete(t *testing.T) {
	s := New()
	if _, ok := s.Lookup(at(checkout, "spec.replicas")); ok {
		t.Fatal("found in an empty state")
	}
	if len(s.Objects()) != 0 {
		t.Fatal("Lookup created something")
	}
	e := s.Entry(at(fib, "spec.replicas"))
	if s.Entry(at(fib, "spec.replicas")) != e {
		t.Fatal("Entry made a second entry")
	}
	s.Entry(at(checkout, "spec.replicas"))
	s.Entry(at(eu1, "spec.nodes"))
	if got := s.Objects(); !slices.Equal(got, []addrs.Object{checkout, fib, eu1}) {
		t.Fatalf("objects %v", got)
	}
	if o, ok := s.Object(fib); !ok || o.Attrs["spec.replicas"] != e {
		t.Fatal("Object")
	}
	s.Delete(at(fib, "spec.replicas"))
	s.Delete(at(fib, "spec.nothing"))
	if _, ok := s.Object(fib); ok {
		t.Fatal("an object with no attribute is listed")
	}
}

// A state Load did not return (or that came from another backend) writes
// every shard it holds and removes none.
func TestStateFromElsewhereWritesAll(t *testing.T) {
	a, b := newBackend(t), newBackend(t)
	s := New()
	fillObject(s, 1, 0)
	fillObject(s, 2, 0)
	save(t, a, s)
	fresh := New()
	fillObject(fresh, 3, 0)
	if st := save(t, a, fresh); st != (SaveStats{Written: 1}) {
		t.Fatalf("a new state: %+v", st)
	}
	if got := load(t, a).Objects(); len(got) != 3 {
		t.Fatalf("a new state's Save removed shards: %v", got)
	}
	s.Delete(addrs.Attr{Object: benchObject(1), Path: benchReplicas})
	if st := save(t, b, s); st != (SaveStats{Written: 2}) {
		t.Fatalf("to another backend: %+v", st)
	}
	if st := save(t, b, s); st != (SaveStats{}) {
		t.Fatalf("again: %+v", st)
	}
}
