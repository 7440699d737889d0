package samplebuf

import (
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/providers"
)

// TestBufferIsBounded: a world advanced by hours at once, with nobody
// taking its samples, keeps only Retention of them; a series appended
// again without its cache (a rebuilt world's) keeps its id.
func TestBufferIsBounded(t *testing.T) {
	b := NewBuffer()
	l := labels.FromStrings("__name__", "up", "pod", "a")
	var cache any
	const step = 5_000 // ms, a scrape
	end := int64(6 * time.Hour / time.Millisecond)
	most := 0
	for ts := int64(0); ts <= end; ts += step {
		if err := b.AppendCached(l, &cache, ts, 1); err != nil {
			t.Fatal(err)
		}
		most = max(most, len(b.samples))
	}
	if per := int(Retention.Milliseconds() / step); most > per*3/2+1 {
		t.Fatalf("the buffer held %d samples, more than one and a half retentions (%d)", most, per*3/2)
	}
	r := b.Take(providers.SignalsRequest{Instance: "another"})
	if len(r.Samples) == 0 || r.Samples[0].T < end-Retention.Milliseconds()*3/2 || r.Samples[0].T > end-Retention.Milliseconds() || r.Samples[len(r.Samples)-1].T != end {
		t.Fatalf("took %d samples from %d to %d", len(r.Samples), r.Samples[0].T, r.Samples[len(r.Samples)-1].T)
	}
	if r.Cursor != uint64(end/step+1) {
		t.Errorf("cursor %d, want the count of samples ever appended, %d", r.Cursor, end/step+1)
	}
	var fresh any
	if err := b.AppendCached(labels.FromStrings("__name__", "up", "pod", "a"), &fresh, end+step, 1); err != nil {
		t.Fatal(err)
	}
	if fresh != cache || len(b.series) != 1 {
		t.Errorf("the same series got id %v (was %v); %d series", fresh, cache, len(b.series))
	}
}

// A bounded buffer nobody reads holds at most its samples, and a series
// past its bound starts a new instance: a reader starts from zero, and a
// caller's old handle finds its series again under the new ids.
func TestBoundedBuffer(t *testing.T) {
	b := NewBounded(3, 100)
	var up any
	upL := labels.FromStrings("__name__", "up")
	for ts := range int64(1000) {
		if err := b.AppendCached(upL, &up, ts, float64(ts)); err != nil {
			t.Fatal(err)
		}
		if len(b.samples) > 100 {
			t.Fatalf("%d samples held, bound 100", len(b.samples))
		}
	}
	r := b.Take(providers.SignalsRequest{})
	if last := r.Samples[len(r.Samples)-1]; last.V != 999 || r.Cursor != 1000 {
		t.Fatalf("the newest sample %+v, cursor %d: want 999 and every sample counted", last, r.Cursor)
	}
	first := r.Instance
	caches := make([]any, 3)
	for i := range 3 {
		if err := b.AppendCached(labels.FromStrings("__name__", "x", "i", string(rune('a'+i))), &caches[i], 2000, 1); err != nil {
			t.Fatal(err)
		}
	}
	if b.instance == first || len(b.series) != 1 {
		t.Fatalf("a fourth series under a bound of 3: instance %s (was %s), %d series", b.instance, first, len(b.series))
	}
	// up's handle is from the old instance: it must not name x's id.
	if err := b.AppendCached(upL, &up, 2001, 7); err != nil {
		t.Fatal(err)
	}
	r = b.Take(providers.SignalsRequest{Instance: first, Cursor: 1000, KnownSeries: 3})
	byID := map[uint64]map[string]string{}
	for _, s := range r.Series {
		byID[s.ID] = s.Labels
	}
	if r.Instance == first || len(r.Series) != 2 {
		t.Fatalf("after the restart: instance %s, series %v", r.Instance, r.Series)
	}
	for _, s := range r.Samples {
		if s.T == 2001 && (byID[s.Series]["__name__"] != "up" || s.V != 7) {
			t.Fatalf("up's sample landed on %v", byID[s.Series])
		}
	}
}
