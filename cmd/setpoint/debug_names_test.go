package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// TestDebugStoreNamesBounded: names asked for through the eval endpoint
// are forgotten once past the store's retention (on the clock of its
// samples, set here), and a flood of names leaves /debug/store listing at
// most embedded.MaxRequested of them, saying how many it left out.
func TestDebugStoreNamesBounded(t *testing.T) {
	st := embedded.NewStore(time.Minute)
	l := labels.FromStrings("__name__", "setpoint_test_value", "job", "a")
	sample := func(at time.Time) {
		t.Helper()
		if _, err := st.Append(l, at.UnixMilli(), 1); err != nil {
			t.Fatal(err)
		}
	}
	start := debugT0.Add(-3 * time.Minute)
	sample(start)
	h := newTestDebugServer(embedded.NewSource(st), "")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/debug/promql/eval", strings.NewReader(`{"query": "old_a + old_b"}`)))
	if rec.Code != 200 {
		t.Fatalf("eval: %d %s", rec.Code, rec.Body)
	}
	type listing struct {
		Requested        []string
		RequestedLeftOut int
	}
	get := func() listing {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/store", nil))
		var out listing
		if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil {
			t.Fatalf("/debug/store: %d, %v: %.200s", rec.Code, err, rec.Body)
		}
		return out
	}
	if got := get(); !slices.Equal(got.Requested, []string{"old_a", "old_b"}) {
		t.Fatalf("asked for: %v", got.Requested)
	}

	// Three minutes of samples go by with nobody asking for old_a or old_b.
	for at := start; !at.After(debugT0); at = at.Add(10 * time.Second) {
		sample(at)
	}
	const extra = 5
	flood := make([]string, embedded.MaxRequested+extra)
	for i := range flood {
		flood[i] = fmt.Sprintf("flood_%06d", i)
	}
	st.Request(flood...)

	got := get()
	if len(got.Requested) != embedded.MaxRequested || got.RequestedLeftOut != extra {
		t.Fatalf("%d names listed, %d left out; want %d and %d", len(got.Requested), got.RequestedLeftOut, embedded.MaxRequested, extra)
	}
	for _, old := range []string{"old_a", "old_b"} {
		if _, found := slices.BinarySearch(got.Requested, old); found {
			t.Errorf("%s, last asked for past the retention, is still listed", old)
		}
	}
	if got.Requested[0] != flood[extra] || got.Requested[len(got.Requested)-1] != flood[len(flood)-1] {
		t.Errorf("listed %s … %s; want the newest names, %s … %s", got.Requested[0], got.Requested[len(got.Requested)-1], flood[extra], flood[len(flood)-1])
	}
}
