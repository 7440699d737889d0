package scrape

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// A one-shot plan's queries come before any name is requested: the first
// query of new names scrapes, at the query's time; queries of names
// already scraped do not; a target that failed is not waited for again;
// names no query asked for are never kept; a query of another time
// scrapes nothing.
func TestOnDemand(t *testing.T) {
	var okHits, badHits, configs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) {
		okHits.Add(1)
		fmt.Fprint(w, "# TYPE queue gauge\nqueue 5\n# TYPE temp gauge\ntemp 21\n# TYPE other gauge\nother 1\n")
	})
	mux.HandleFunc("/bad", func(w http.ResponseWriter, _ *http.Request) {
		badHits.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	store := embedded.NewStore(0)
	src := embedded.NewSource(store)
	now := time.Now()
	at := now.Add(-2 * time.Second) // the plan's time, a little before the scrape
	od := &OnDemand{Source: src, Scraper: &Scraper{Store: store},
		Config: func(context.Context) Config {
			configs.Add(1)
			return Config{Timeout: time.Second, Targets: []Target{
				{URL: srv.URL + "/ok", Job: "app", Instance: "ok"},
				{URL: srv.URL + "/bad", Job: "app", Instance: "bad"},
			}}
		},
		Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	val := func(expr string, at time.Time) map[string]float64 {
		t.Helper()
		r, err := od.Query(context.Background(), expr, at)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, s := range r.Samples {
			out[s.Labels.String()] = s.Value
		}
		return out
	}
	if got := val(`queue`, at); got[`{instance="ok", job="app"}`] != 5 || okHits.Load() != 1 || badHits.Load() != 1 {
		t.Fatalf("first query: %v (hits ok %d, bad %d)", got, okHits.Load(), badHits.Load())
	}
	if got := val(`up`, at); got[`{instance="ok", job="app"}`] != 1 || got[`{instance="bad", job="app"}`] != 0 {
		t.Fatalf("up: %v", got)
	}
	if got := val(`queue * 2`, at); got[`{instance="ok", job="app"}`] != 10 || okHits.Load() != 1 {
		t.Fatalf("a query of scraped names scraped again: %v (hits %d)", got, okHits.Load())
	}
	// other was exposed but never asked for: the store has none of it,
	// even though a later scrape read it again.
	if r, _ := src.Query(context.Background(), `other`, at); len(r.Samples) != 0 {
		t.Fatalf("an unrequested name was kept: %v", r.Samples)
	}
	if got := val(`temp`, at); got[`{instance="ok", job="app"}`] != 21 || okHits.Load() != 2 || badHits.Load() != 1 {
		t.Fatalf("a new name: %v (hits ok %d, bad %d: the failed target is not asked again)", got, okHits.Load(), badHits.Load())
	}
	// An hour ago is history a scrape now cannot tell.
	if got := val(`sum(rate(requests_total[1m]))`, now.Add(-time.Hour)); len(got) != 0 || okHits.Load() != 2 {
		t.Fatalf("a query of an hour ago: %v (hits %d)", got, okHits.Load())
	}
	if configs.Load() != 1 {
		t.Fatalf("targets found %d times in one plan", configs.Load())
	}
}
