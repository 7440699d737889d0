package prometheus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// vectorAnswer writes a one-sample vector whose label value is pad bytes
// long, streamed (no Content-Length) unless whole.
func vectorAnswer(w http.ResponseWriter, pad int, whole bool) {
	head := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pad":"`
	tail := `"},"value":[1700000000,"7"]}]}}`
	if whole {
		w.Header().Set("Content-Length", fmt.Sprint(len(head)+pad+len(tail)))
	}
	io.WriteString(w, head)
	chunk := strings.Repeat("x", 64<<10)
	for left := pad; left > 0; left -= len(chunk) {
		io.WriteString(w, chunk[:min(left, len(chunk))])
	}
	io.WriteString(w, tail)
}

// TestResponseBound: an answer past signals.MaxResponseBytes is an error
// naming the bound, whether the server says its length or streams it.
func TestResponseBound(t *testing.T) {
	var pad atomic.Int64
	var whole atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		vectorAnswer(w, int(pad.Load()), whole.Load())
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []bool{false, true} {
		whole.Store(w)
		pad.Store(1 << 20)
		if r, err := s.Query(context.Background(), "x", time.Now()); err != nil || len(r.Samples) != 1 || r.Samples[0].Value != 7 {
			t.Fatalf("1 MiB answer (length given: %v): %+v %v", w, r, err)
		}
		pad.Store(signals.MaxResponseBytes)
		_, err := s.Query(context.Background(), "x", time.Now())
		if !errors.Is(err, signals.ErrBound) || !strings.Contains(err.Error(), "past the query bound of 32 MiB") {
			t.Fatalf("a 32 MiB answer (length given: %v): %v", w, err)
		}
	}
}

// TestResponseBoundEdge: a body of exactly the bound is read; one byte
// more is not.
func TestResponseBoundEdge(t *testing.T) {
	var size atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Flushed first, so no Content-Length: the read is what counts.
		w.(http.Flusher).Flush()
		io.WriteString(w, strings.Repeat("x", int(size.Load())))
	}))
	defer srv.Close()
	c := &http.Client{Transport: capped{rt: http.DefaultTransport, max: 100}}
	for _, n := range []int64{100, 101} {
		size.Store(n)
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n == 100 && (err != nil || len(b) != 100) {
			t.Errorf("100 bytes: %d read, %v", len(b), err)
		}
		if n == 101 && !errors.Is(err, signals.ErrBound) {
			t.Errorf("101 bytes: %d read, %v", len(b), err)
		}
	}
}

// TestQueryCostBeforeSending: a query whose subqueries are past the
// sample bound is refused without asking the server; one this parser does
// not know is the server's to judge.
func TestQueryCostBeforeSending(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"unknown function"}`)
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Query(context.Background(), `count_over_time(vector(1)[1y:1s])`, time.Now())
	if !errors.Is(err, signals.ErrBound) || !strings.Contains(err.Error(), "past the query bound of 5000000 samples") || asked.Load() != 0 {
		t.Fatalf("%v (the server asked %d times)", err, asked.Load())
	}
	if _, err := s.Query(context.Background(), `newer_function(x)`, time.Now()); err == nil || asked.Load() != 1 {
		t.Fatalf("%v (the server asked %d times)", err, asked.Load())
	}
}

// TestServerTimeout: the server stopping the query at the timeout it was
// sent is the time bound, named.
func TestServerTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("timeout") != "3s" {
			t.Errorf("timeout sent: %q %v", r.Form.Get("timeout"), err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`)
	}))
	defer srv.Close()
	s, err := New(Config{URL: srv.URL, Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Query(context.Background(), `x`, time.Now())
	if !errors.Is(err, signals.ErrBound) || !strings.Contains(err.Error(), "the Prometheus server stopped the evaluation: past the query bound of 3s") {
		t.Fatal(err)
	}
}

// TestTimeoutCapped: a configured timeout longer than every source's
// bound is that bound.
func TestTimeoutCapped(t *testing.T) {
	for _, c := range []struct{ set, want time.Duration }{
		{0, 5 * time.Second},
		{2 * time.Second, 2 * time.Second},
		{time.Hour, signals.MaxQueryTime},
	} {
		s, err := New(Config{URL: "http://127.0.0.1:9", Timeout: c.set})
		if err != nil {
			t.Fatal(err)
		}
		if s.timeout != c.want {
			t.Errorf("timeout %s: %s, want %s", c.set, s.timeout, c.want)
		}
	}
}
