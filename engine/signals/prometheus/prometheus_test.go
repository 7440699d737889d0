package prometheus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/internal/promtest"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// exporter serves what the real Prometheus scrapes: a counter that grows
// by 10 a scrape, a gauge, and a gauge that is NaN.
func exporter(t *testing.T) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c := n.Add(10)
		fmt.Fprintf(w, "# TYPE requests_total counter\nrequests_total{app=\"a\"} %d\n# TYPE temperature gauge\ntemperature{room=\"x\"} 21.5\ntemperature{room=\"nan\"} NaN\n", c)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, f)
}

// Against a real Prometheus server scraping a real endpoint.
func TestRealServer(t *testing.T) {
	prom := promtest.Start(t, exporter(t))
	s, err := New(Config{URL: prom.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := func(expr string) signals.Result {
		t.Helper()
		r, err := s.Query(ctx, expr, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The first scrape lands up to a few seconds after ready.
	eventually(t, "the first scrape", func() bool {
		r := q(`up{job="test"}`)
		return len(r.Samples) == 1 && r.Samples[0].Value == 1
	})
	// The NaN gauge is dropped and counted, never a 0.
	r := q("temperature")
	if r.Kind != signals.Vector || len(r.Samples) != 1 || r.Samples[0].Value != 21.5 || r.Samples[0].Labels["room"] != "x" || r.Dropped != 1 {
		t.Fatalf("temperature: %+v", r)
	}
	if _, has := r.Samples[0].Labels["__name__"]; has {
		t.Fatal("the metric name is not a label")
	}
	// 10 a scrape, a scrape a second: a rate of about 10/s once two
	// scrapes are in.
	eventually(t, "a rate", func() bool {
		r := q(`sum(rate(requests_total[5s]))`)
		return len(r.Samples) == 1 && r.Samples[0].Value > 5 && r.Samples[0].Value < 15
	})
	if r := q("no_such_metric"); len(r.Samples) != 0 || r.Dropped != 0 || r.NoData() == "" {
		t.Fatalf("missing: %+v", r)
	}
	if r := q("1 + 1"); r.Kind != signals.Scalar || len(r.Samples) != 1 || r.Samples[0].Value != 2 {
		t.Fatalf("scalar: %+v", r)
	}
	if r := q(`temperature{room="x"}[5s]`); r.Kind != signals.Matrix || len(r.Samples) != 1 || len(r.Samples[0].Points) == 0 {
		t.Fatalf("matrix: %+v", r)
	}
	// A query the server cannot parse: its message.
	_, err = s.Query(ctx, "sum(", time.Now())
	if err == nil || !strings.Contains(err.Error(), `evaluating "sum("`) || !strings.Contains(err.Error(), "parse error") {
		t.Fatalf("bad query: %v", err)
	}
}

// A server that is down, or slower than the timeout: an error, promptly.
func TestDownAndSlow(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, _ := New(Config{URL: "http://" + addr, Timeout: time.Second})
	if _, err := s.Query(context.Background(), "up", time.Now()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("down: %v", err)
	}
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	s, _ = New(Config{URL: slow.URL, Timeout: 200 * time.Millisecond})
	start := time.Now()
	_, err = s.Query(context.Background(), "up", time.Now())
	if !errors.Is(err, signals.ErrBound) || !strings.Contains(err.Error(), "the Prometheus server had not answered: past the query bound of 200ms") {
		t.Fatalf("slow: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the timeout did not bound the query: %s", time.Since(start))
	}
}

// Credentials are sent as configured; a warning is logged once.
func TestAuthAndWarnings(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"status":"success","warnings":["the query hit a limit"],"data":{"resultType":"scalar","result":[1700000000,"3"]}}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{URL: srv.URL, BearerTokenFile: tok})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	for range 3 {
		r, err := s.Query(context.Background(), "x", time.Now())
		if err != nil || r.Samples[0].Value != 3 {
			t.Fatal(r, err)
		}
	}
	if got.Load() != "Bearer s3cret" {
		t.Fatalf("authorization: %v", got.Load())
	}
	if n := strings.Count(logs.String(), "the query hit a limit"); n != 1 {
		t.Fatalf("the warning was logged %d times:\n%s", n, logs.String())
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("hunter2"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ = New(Config{URL: srv.URL, Username: "setpoint", PasswordFile: pw})
	if _, err := s.Query(context.Background(), "x", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got.Load() != "Basic c2V0cG9pbnQ6aHVudGVyMg==" {
		t.Fatalf("basic auth: %v", got.Load())
	}
	if _, err := New(Config{URL: srv.URL, BearerTokenFile: filepath.Join(dir, "none")}); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

// BenchmarkQueryRealServer: one instant query's round trip against a real
// Prometheus on loopback.
func BenchmarkQueryRealServer(b *testing.B) {
	prom := promtest.Start(b, exporterB(b))
	s, err := New(Config{URL: prom.URL})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Query(ctx, `sum(rate(requests_total[5s]))`, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

func exporterB(b *testing.B) string {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "requests_total{app=\"a\"} %d\n", n.Add(10))
	}))
	b.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
