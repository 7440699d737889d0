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
