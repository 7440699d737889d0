package scrape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

func query(t *testing.T, store *embedded.Store, expr string, at time.Time) map[string]float64 {
	t.Helper()
	r, err := embedded.NewSource(store).Query(context.Background(), expr, at)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range r.Samples {
		out[s.Labels.String()] = s.Value
	}
	return out
}

func TestScrapeTextAndOpenMetrics(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE requests_total counter\nrequests_total{app=\"a\",instance=\"spoofed\"} 42\n# TYPE other gauge\nother 1\n")
	})
	mux.HandleFunc("/om", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		fmt.Fprint(w, "# TYPE requests counter\nrequests_total{app=\"b\"} 7\n# TYPE queue gauge\nqueue 3\n# EOF\n")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	store := embedded.NewStore(0)
	store.Request("requests_total", "queue")
	s := &Scraper{Store: store}
	now := time.Now()
	res := s.Once(context.Background(), []Target{{URL: srv.URL + "/text", Job: "apps"}, {URL: srv.URL + "/om", Job: "apps", Instance: "om-1"}}, now)
	if !res[0].Up || res[0].Kept != 1 || res[0].Dropped != 1 || !res[1].Up || res[1].Kept != 2 {
		t.Fatalf("results: %+v", res)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	got := query(t, store, "requests_total", now)
	// The target's instance wins over the one it exposes, which is kept
	// aside.
	if got[fmt.Sprintf(`{app="a", exported_instance="spoofed", instance=%q, job="apps"}`, host)] != 42 || got[`{app="b", instance="om-1", job="apps"}`] != 7 {
		t.Fatalf("requests_total: %v", got)
	}
	if got := query(t, store, "other", now); len(got) != 0 {
		t.Fatalf("an unrequested name was kept: %v", got)
	}
	if got := query(t, store, "up", now); len(got) != 2 {
		t.Fatalf("up: %v", got)
	}
}

// A target that is down, slow or too big is an up == 0 sample, and the
// others are scraped meanwhile: the cycle takes about one timeout, not
// the sum of them.
func TestBadTargetsAreSamples(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(http.ResponseWriter, *http.Request) { <-release })
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		for range 2000 {
			fmt.Fprint(w, "# a comment line that goes on for a while to make the body large\n")
		}
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "queue 5\n") })
	mux.HandleFunc("/500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)
	store := embedded.NewStore(0)
	store.Request("queue")
	// 1s: the good targets must answer within it on a busy machine too;
	// the cycle's bound below still tells one timeout from a stall.
	s := &Scraper{Store: store, Timeout: time.Second, MaxBody: 64 << 10}
	targets := []Target{{URL: closed, Job: "j"}, {URL: srv.URL + "/slow", Job: "j", Instance: "slow"}, {URL: srv.URL + "/big", Job: "j", Instance: "big"}, {URL: srv.URL + "/500", Job: "j", Instance: "500"}}
	for i := range 10 {
		targets = append(targets, Target{URL: srv.URL + "/ok", Job: "j", Instance: fmt.Sprintf("ok-%d", i)})
	}
	now := time.Now()
	start := time.Now()
	res := s.Once(context.Background(), targets, now)
	took := time.Since(start)
	for i, want := range []string{"connection refused", "deadline exceeded", "larger than the limit", "HTTP 500"} {
		if res[i].Up || res[i].Err == nil || !strings.Contains(res[i].Err.Error(), want) {
			t.Errorf("target %d: %+v, want an error saying %q", i, res[i], want)
		}
	}
	for _, r := range res[4:] {
		if !r.Up || r.Kept != 1 {
			t.Errorf("a good target: %+v", r)
		}
	}
	up := query(t, store, `count(up == 0)`, now)
	if up["{}"] != 4 {
		t.Fatalf("up == 0 samples: %v", up)
	}
	if took > 5*time.Second {
		t.Fatalf("one cycle took %s: the slow target stalled it", took)
	}
}

// BenchmarkCycle1000x100: one scrape cycle of 1,000 targets of 100 series
// each (50 of them requested). Goal: ≤ 0.5 s of one core per cycle.
func BenchmarkCycle1000x100(b *testing.B) {
	var page strings.Builder
	for i := range 100 {
		name := "kept"
		if i%2 == 1 {
			name = "other"
		}
		fmt.Fprintf(&page, "%s_metric{series=\"%d\",pod=\"p\"} %d\n", name, i, i)
	}
	body := page.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) }))
	defer srv.Close()
	targets := make([]Target, 1000)
	for i := range targets {
		targets[i] = Target{URL: fmt.Sprintf("%s/t%d", srv.URL, i), Job: "bench", Instance: fmt.Sprintf("t%d", i)}
	}
	store := embedded.NewStore(0)
	store.Request("kept_metric")
	s := &Scraper{Store: store}
	var cpu time.Duration
	now := time.Now()
	for b.Loop() {
		before := usage()
		s.Once(context.Background(), targets, now)
		cpu += usage() - before
		now = now.Add(5 * time.Second)
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/cycle")
}

// usage is the process's CPU time (the test server's too: both sides of
// each scrape are counted).
func usage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestForeignTimestamps: a target exposing samples a day ahead (or an
// hour behind) does not move the store's time, so what it holds stays.
func TestForeignTimestamps(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ahead, behind := now.Add(24*time.Hour).UnixMilli(), now.Add(-time.Hour).UnixMilli()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "x 1 %d\nx{a=\"old\"} 2 %d\ny 3\n", ahead, behind)
	}))
	defer srv.Close()
	store := embedded.NewStore(0)
	store.Request("x", "y", "kept")
	if _, err := store.Append(labelsOf("kept"), now.Add(-time.Minute).UnixMilli(), 7); err != nil {
		t.Fatal(err)
	}
	res := (&Scraper{Store: store}).Once(context.Background(), []Target{{URL: srv.URL, Job: "j"}}, now)
	if !res[0].Up || res[0].Kept != 1 || res[0].Dropped != 2 {
		t.Fatalf("result %+v: want y kept, both foreign x dropped", res[0])
	}
	if got := query(t, store, "kept", now); len(got) != 1 {
		t.Fatalf("the store lost what it held: %v", got)
	}
}

func labelsOf(name string) labels.Labels { return labels.FromStrings("__name__", name) }
