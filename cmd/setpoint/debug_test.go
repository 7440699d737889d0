package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// debugT0 is the watch clock's now in the handler tests.
var debugT0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// debugStore holds setpoint_test_value{job="a"}: 40 a minute before
// debugT0, 42 at it.
func debugStore(t *testing.T) *embedded.Store {
	t.Helper()
	st := embedded.NewStore(0)
	l := labels.FromStrings("__name__", "setpoint_test_value", "job", "a")
	for _, s := range []struct {
		at time.Time
		v  float64
	}{{debugT0.Add(-time.Minute), 40}, {debugT0, 42}} {
		if _, err := st.Append(l, s.at.UnixMilli(), s.v); err != nil {
			t.Fatal(err)
		}
	}
	st.Request("setpoint_test_value")
	return st
}

func newTestDebugServer(src signals.Source, token string) http.Handler {
	d := newDebugServer(src, func() time.Time { return debugT0 }, newSelfMetrics().handler(), nil)
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		d.token = &sum
	}
	return d.handler()
}

// failingSource has no parser of its own (as a Prometheus server) and
// fails every evaluation.
type failingSource struct{}

func (failingSource) Query(context.Context, string, time.Time) (signals.Result, error) {
	return signals.Result{}, errors.New("the server is gone")
}

type evalResponse struct {
	Expr    string
	At      string
	Kind    string
	Samples []signals.Sample
	Dropped int
	NoData  string
}

func TestDebugEndpoints(t *testing.T) {
	embeddedH := newTestDebugServer(embedded.NewSource(debugStore(t)), "")
	prom, err := promsource.New(promsource.Config{URL: "http://127.0.0.1:9/"})
	if err != nil {
		t.Fatal(err)
	}
	_, parseErr := defaultParser.ParseExpr("sum(rate(x[5m])")
	if parseErr == nil {
		t.Fatal("the bad query parses")
	}
	value := func(want float64, at time.Time) func(*testing.T, []byte) {
		return func(t *testing.T, body []byte) {
			var r evalResponse
			if err := json.Unmarshal(body, &r); err != nil {
				t.Fatalf("%v in %s", err, body)
			}
			if len(r.Samples) != 1 || r.Samples[0].Value != want || r.At != at.Format(time.RFC3339) || r.NoData != "" {
				t.Fatalf("want %g at %s, got %s", want, at.Format(time.RFC3339), body)
			}
		}
	}
	for _, c := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		status       int
		detail       string // a problem's detail contains it
		check        func(*testing.T, []byte)
	}{
		{name: "known value at the clock's now", body: `{"query": "setpoint_test_value"}`, status: 200, check: value(42, debugT0)},
		{name: "labels and kind", body: `{"query": "setpoint_test_value"}`, status: 200, check: func(t *testing.T, b []byte) {
			var r evalResponse
			if json.Unmarshal(b, &r) != nil || r.Kind != "vector" || r.Expr != "setpoint_test_value" || r.Samples[0].Labels["job"] != "a" {
				t.Fatalf("%s", b)
			}
		}},
		{name: "RFC 3339 time", body: `{"query": "setpoint_test_value", "time": "2024-05-01T11:59:00Z"}`, status: 200, check: value(40, debugT0.Add(-time.Minute))},
		{name: "unix seconds as a string", body: fmt.Sprintf(`{"query": "setpoint_test_value", "time": "%d"}`, debugT0.Add(-time.Minute).Unix()), status: 200, check: value(40, debugT0.Add(-time.Minute))},
		{name: "unix seconds as a number", body: fmt.Sprintf(`{"query": "setpoint_test_value", "time": %d.5}`, debugT0.Add(-time.Minute).Unix()), status: 200, check: value(40, debugT0.Add(-time.Minute))},
		{name: "scalar", body: `{"query": "1 + 1"}`, status: 200, check: value(2, debugT0)},
		{name: "no series is a value too", body: `{"query": "absent_metric"}`, status: 200, check: func(t *testing.T, b []byte) {
			var r evalResponse
			if json.Unmarshal(b, &r) != nil || r.NoData != "no series matched" || r.Samples == nil {
				t.Fatalf("%s", b)
			}
		}},
		{name: "missing query", body: `{"time": "2024-05-01T11:59:00Z"}`, status: 400, detail: "missing query"},
		{name: "blank query", body: `{"query": "  "}`, status: 400, detail: "missing query"},
		{name: "empty body", body: ``, status: 400, detail: "not a JSON object"},
		{name: "bad JSON", body: `{"query": `, status: 400, detail: "not a JSON object"},
		{name: "not an object", body: `["up"]`, status: 400, detail: "not a JSON object"},
		{name: "two values", body: `{"query": "up"} {"query": "up"}`, status: 400, detail: "more than one JSON value"},
		{name: "misspelt field", body: `{"query": "up", "tiem": "1"}`, status: 400, detail: `unknown field "tiem"`},
		{name: "body over 64 KiB", body: `{"query": "` + strings.Repeat(" ", 64<<10) + `up"}`, status: 400, detail: "larger than 64 KiB"},
		{name: "bad time", body: `{"query": "up", "time": "yesterday"}`, status: 400, detail: "time"},
		{name: "NaN time", body: `{"query": "up", "time": "NaN"}`, status: 400, detail: "time"},
		{name: "bad PromQL", body: `{"query": "sum(rate(x[5m])"}`, status: 422, detail: parseErr.Error()},
		{name: "0/0 is NaN", body: `{"query": "0/0"}`, status: 422, detail: "NaN or ±Inf"},
		{name: "1/0 is Inf", body: `{"query": "1/0"}`, status: 422, detail: "NaN or ±Inf"},
		{name: "-1/0 is -Inf", body: `{"query": "-1/0"}`, status: 422, detail: "NaN or ±Inf"},
		{name: "a vector of NaN", body: `{"query": "setpoint_test_value * 0 / 0"}`, status: 422, detail: "NaN or ±Inf"},
		{name: "a query past the sample bound", body: `{"query": "count_over_time(vector(1)[1y:1s])"}`, status: 422, detail: "past the query bound of 5000000 samples"},
		{name: "a query past it on a Prometheus server", h: newTestDebugServer(prom, ""), body: `{"query": "count_over_time(vector(1)[1y:1s])"}`, status: 422, detail: "past the query bound of 5000000 samples"},
		{name: "GET eval", method: "GET", status: 405},
		{name: "PUT eval", method: "PUT", body: `{"query": "up"}`, status: 405},
		// A handler of its own: every query above asked the store for
		// the names it reads.
		{name: "store", h: newTestDebugServer(embedded.NewSource(debugStore(t)), ""), method: "GET", path: "/debug/store", status: 200, check: func(t *testing.T, b []byte) {
			var s struct {
				Requested      []string
				Series, Points int
				Oldest, Newest string
			}
			if err := json.Unmarshal(b, &s); err != nil || strings.Join(s.Requested, ",") != "setpoint_test_value" || s.Series != 1 || s.Points != 2 || s.Newest != "2024-05-01T12:00:00Z" {
				t.Fatalf("%v: %s", err, b)
			}
		}},
		{name: "POST store", method: "POST", path: "/debug/store", status: 405},
		{name: "metrics", method: "GET", path: "/metrics", status: 200, check: func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), `setpoint_applies_total{result="ok"} 0`) {
				t.Fatalf("%s", b)
			}
		}},
		{name: "unknown path", method: "GET", path: "/debug/pprof/", status: 404},
		{name: "store of a Prometheus server", h: newTestDebugServer(prom, ""), method: "GET", path: "/debug/store", status: 404, detail: "the signal source is a Prometheus server"},
		{name: "bad PromQL, source without a parser", h: newTestDebugServer(failingSource{}, ""), body: `{"query": "sum(rate(x[5m])"}`, status: 422, detail: parseErr.Error()},
		{name: "source failure", h: newTestDebugServer(failingSource{}, ""), body: `{"query": "up"}`, status: 500, detail: "the server is gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, method, path := c.h, c.method, c.path
			if h == nil {
				h = embeddedH
			}
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/debug/promql/eval"
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(c.body)))
			body := rec.Body.Bytes()
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, body)
			}
			if c.status == 405 && rec.Header().Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if c.status >= 400 {
				var p problem
				if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
					t.Errorf("content type %q", ct)
				}
				if err := json.Unmarshal(body, &p); err != nil || p.Status != c.status || p.Type != "about:blank" || p.Title != http.StatusText(c.status) {
					t.Fatalf("not a problem for %d: %v %s", c.status, err, body)
				}
				if !strings.Contains(p.Detail, c.detail) {
					t.Fatalf("detail %q lacks %q", p.Detail, c.detail)
				}
			}
			if c.check != nil {
				c.check(t, body)
			}
		})
	}
}

func TestDebugToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := newDebugConfig("0.0.0.0:8082", file)
	if err != nil {
		t.Fatal(err)
	}
	d := newDebugServer(embedded.NewSource(debugStore(t)), func() time.Time { return debugT0 }, cfg.metrics.handler(), cfg.token)
	h := d.handler()
	for _, c := range []struct {
		name, auth, method, path string
		status                   int
	}{
		{"no header", "", "GET", "/metrics", 401},
		{"wrong token", "Bearer s3cret-tokeN", "GET", "/metrics", 401},
		{"a prefix of it", "Bearer s3cret", "GET", "/metrics", 401},
		{"wrong scheme", "Basic s3cret-token", "GET", "/metrics", 401},
		{"scheme alone", "Bearer", "GET", "/metrics", 401},
		{"no endpoint is open", "", "POST", "/debug/promql/eval", 401},
		{"not even a 404", "", "GET", "/nothing", 401},
		{"the token, trimmed from the file", "Bearer s3cret-token", "GET", "/metrics", 200},
		{"the scheme in lower case", "bearer s3cret-token", "GET", "/debug/store", 200},
		{"eval", "Bearer s3cret-token", "POST", "/debug/promql/eval", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(`{"query": "setpoint_test_value"}`))
			if c.auth != "" {
				r.Header.Set("Authorization", c.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			if c.status == 401 && (rec.Header().Get("WWW-Authenticate") == "" || rec.Header().Get("Content-Type") != "application/problem+json") {
				t.Errorf("401 headers: %v", rec.Header())
			}
		})
	}

	for _, c := range []struct {
		name, content, want string
	}{
		{"empty", " \n", "empty"},
		{"too large", strings.Repeat("x", maxTokenFile+1), "larger than"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newDebugConfig("127.0.0.1:0", p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s token file: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := newDebugConfig("127.0.0.1:0", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--debug-token-file") {
		t.Errorf("missing token file: %v", err)
	}
}

func TestDebugBindAddress(t *testing.T) {
	for _, c := range []struct {
		addr    string
		refused string // "" for allowed without a token
	}{
		{"127.0.0.1:8082", ""},
		{"127.9.8.7:0", ""},
		{"[::1]:8082", ""},
		{"[::ffff:127.0.0.1]:8082", ""},
		{"localhost:8082", ""},
		{"LocalHost:8082", ""},
		{"0.0.0.0:8082", "not a loopback address"},
		{":8082", "not a loopback address"},
		{"[::]:8082", "not a loopback address"},
		{"10.1.2.3:8082", "not a loopback address"},
		{"128.0.0.1:8082", "not a loopback address"},
		{"localhost.example.com:8082", "not a loopback address"},
		{"127.0.0.1", "missing port"},
	} {
		cfg, err := newDebugConfig(c.addr, "")
		switch {
		case c.refused == "" && (err != nil || cfg == nil):
			t.Errorf("%s: refused: %v", c.addr, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: want refused (%q), got %v", c.addr, c.refused, err)
		}
	}
	if cfg, err := newDebugConfig("", ""); cfg != nil || err != nil || cfg.selfMetrics() != nil {
		t.Errorf("off: %v %v", cfg, err)
	}
	if _, err := newDebugConfig("", "/some/token"); err == nil {
		t.Error("a token file without --debug-addr is accepted")
	}
	// From the command line: refused before anything starts (the
	// directory does not exist, so a watch that was not refused fails
	// otherwise rather than run).
	_, errOut, code := runCLI(t, "watch", "--debug-addr", "0.0.0.0:0", "testdata/no-such-dir")
	if code != 1 || !strings.Contains(errOut, "--debug-addr 0.0.0.0:0 is not a loopback address") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestDebugServerStopsWithTheContext: the server listens while the watch
// runs and lets go of its port when the watch's context ends.
func TestDebugServerStopsWithTheContext(t *testing.T) {
	cfg, err := newDebugConfig("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, stop, err := cfg.serve(ctx, embedded.NewSource(debugStore(t)), func() time.Time { return debugT0 })
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr.String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// A second server on the same port is refused while the first runs.
	if _, _, err := (&debugConfig{addr: addr.String(), metrics: newSelfMetrics()}).serve(ctx, nil, nil); err == nil {
		t.Fatal("a second server bound the same port")
	}
	cancel()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop when the context ended")
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("still serving after the context ended")
	}
}

// metricValue finds one series (name and labels in exposition order) in
// the text format.
func metricValue(text, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestMetricsCountAReconcile runs watch's reconcile on the shipped specs:
// one plan that applies (the quick edits drop the stability windows) and
// one that holds (the shipped 3m window).
func TestMetricsCountAReconcile(t *testing.T) {
	ws, clk, q, set := reconcileRig(t, quick...)
	m := newSelfMetrics()
	m.instrument(ws.eng.Providers)
	h := m.handler()
	before := scrape(t, h)
	if v, ok := metricValue(before, `setpoint_applies_total{result="ok"}`); !ok || v != 0 {
		t.Fatalf("applies before: %v %v", v, ok)
	}
	res, _ := reconcileBatch(context.Background(), ws, q, set, []string{"NFR/shop/checkout"}, "test", clk, time.Second, nil, m)
	if r := res["NFR/shop/checkout"]; r.Err != nil {
		t.Fatal(r.Err)
	}
	after := scrape(t, h)
	for _, name := range []string{"setpoint_decisions_total", "setpoint_applies_total", "setpoint_holds_total", "setpoint_reconcile_duration_seconds", "setpoint_provider_call_duration_seconds"} {
		if !strings.Contains(after, "# TYPE "+name+" ") {
			t.Errorf("no %s in:\n%s", name, after)
		}
	}
	for _, c := range []struct {
		series  string
		atLeast float64
	}{
		{`setpoint_applies_total{result="ok"}`, 1},
		{`setpoint_applies_total{result="failed"}`, 0},
		{`setpoint_decisions_total{dimension="replicas",kind="NFR"}`, 1},
		{`setpoint_reconcile_duration_seconds_count`, 1},
		{`setpoint_provider_call_duration_seconds_count{method="Read",provider="sim"}`, 1},
		{`setpoint_provider_call_duration_seconds_count{method="PlanChange",provider="sim"}`, 1},
		{`setpoint_provider_call_duration_seconds_count{method="Apply",provider="sim"}`, 1},
	} {
		if v, ok := metricValue(after, c.series); !ok || v < c.atLeast || (c.atLeast == 0 && v != 0) {
			t.Errorf("%s = %v (found %v), want ≥ %v", c.series, v, ok, c.atLeast)
		}
	}
	if v, _ := metricValue(after, `setpoint_reconcile_duration_seconds_count`); v != 1 {
		t.Errorf("%v reconciles recorded, want 1", v)
	}

	ws, clk, q, set = reconcileRig(t)
	m = newSelfMetrics()
	_, _ = reconcileBatch(context.Background(), ws, q, set, []string{"NFR/shop/checkout"}, "test", clk, time.Second, nil, m)
	if v, ok := metricValue(scrape(t, m.handler()), `setpoint_holds_total{reason="stability"}`); !ok || v < 1 {
		t.Errorf("the stability window's hold is not counted: %v %v", v, ok)
	}
}

// TestDebugWatchCommand runs the real watch with its debug endpoints on
// a copy of specs/, guarded by a token.
func TestDebugWatchCommand(t *testing.T) {
	dir := copySpecs(t)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("watch-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := startProc(t, "watch", "--debug-addr", "127.0.0.1:0", "--debug-token-file", token, dir)
	poll := func(what string, ok func() bool) { t.Helper(); testutil.Eventually(t, 20*time.Second, what, ok) }
	base := "http://" + w.addr(t, "serving debug endpoints")
	get := func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const auth = "Bearer watch-token"
	if code, _ := get("GET", "/metrics", "", ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	// The start's reconcile applies fib's scale-to-zero bound.
	var metrics string
	poll("counted apply", func() bool {
		code, body := get("GET", "/metrics", auth, "")
		metrics = body
		v, _ := metricValue(body, `setpoint_applies_total{result="ok"}`)
		return code == 200 && v >= 1
	})
	for _, series := range []string{`setpoint_reconcile_duration_seconds_count`, `setpoint_provider_call_duration_seconds_count{method="Read",provider="sim"}`, `setpoint_decisions_total{dimension="replicas",kind="NFR"}`, `setpoint_holds_total{reason="stability"}`, `go_goroutines`} {
		if _, ok := metricValue(metrics, series); !ok {
			t.Errorf("no %s in:\n%s", series, metrics)
		}
	}
	if code, body := get("POST", "/debug/promql/eval", auth, `{"query": "2 * 21"}`); code != 200 || !strings.Contains(body, `"value": 42`) {
		t.Errorf("eval: %d %s", code, body)
	}
	if code, body := get("GET", "/debug/store", auth, ""); code != 200 || !strings.Contains(body, `"series"`) || strings.Contains(body, `"series": 0,`) {
		t.Errorf("store: %d %s", code, body)
	}
	w.stop(t, 10*time.Second)
}

// heldSource answers every query once released, telling started of each
// as it begins: how a test holds evaluations in flight.
type heldSource struct {
	started chan string
	release chan struct{}
}

func (h heldSource) Query(_ context.Context, expr string, at time.Time) (signals.Result, error) {
	h.started <- expr
	<-h.release
	return signals.Result{Expr: expr, At: at, Kind: signals.Scalar, Samples: []signals.Sample{{Value: 1}}}, nil
}

// TestDebugEvalsAtOnce: with two evaluations in flight a third is refused
// with 429 and Retry-After, not queued; once they end, one is served again.
func TestDebugEvalsAtOnce(t *testing.T) {
	src := heldSource{started: make(chan string, 8), release: make(chan struct{})}
	h := newTestDebugServer(src, "")
	post := func(query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/debug/promql/eval", strings.NewReader(`{"query": "`+query+`"}`)))
		return rec
	}
	held := make(chan *httptest.ResponseRecorder, maxEvals)
	for i := range maxEvals {
		go func() { held <- post(fmt.Sprintf("vector(%d)", i)) }()
	}
	for range maxEvals {
		<-src.started
	}
	rec := post("vector(9)")
	var p problem
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || json.Unmarshal(rec.Body.Bytes(), &p) != nil || !strings.Contains(p.Detail, "2 evaluations are running") {
		t.Fatalf("a third evaluation: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	select {
	case q := <-src.started:
		t.Fatalf("the refused query %s was evaluated", q)
	default:
	}
	close(src.release)
	for range maxEvals {
		if rec := <-held; rec.Code != 200 {
			t.Fatalf("a held evaluation: %d %s", rec.Code, rec.Body)
		}
	}
	if rec := post("vector(9)"); rec.Code != 200 {
		t.Fatalf("after the others ended: %d %s", rec.Code, rec.Body)
	}
}

// TestDebugEvalAttackMemory sends the query that took 3.4 GB (four at
// once, as the report had it) to a real watch's endpoint and reads the
// process's peak resident memory from the kernel.
func TestDebugEvalAttackMemory(t *testing.T) {
	dir := copySpecs(t)
	w := startProc(t, "watch", "--debug-addr", "127.0.0.1:0", dir)
	status := fmt.Sprintf("/proc/%d/status", w.cmd.Process.Pid)
	if _, err := os.Stat(status); err != nil {
		t.Fatalf("the watch's peak memory cannot be read: %v", err)
	}
	url := "http://" + w.addr(t, "serving debug endpoints") + "/debug/promql/eval"
	type answer struct {
		code int
		body string
		err  error
	}
	const attack = `{"query": "count_over_time(vector(1)[1y:1s])"}`
	answers := make(chan answer, 4)
	for range 4 {
		go func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(attack))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- answer{code: resp.StatusCode, body: string(b)}
		}()
	}
	refused := 0
	for range 4 {
		a := <-answers
		switch {
		case a.err != nil:
			t.Fatal(a.err)
		case a.code == http.StatusUnprocessableEntity && strings.Contains(a.body, "past the query bound of 5000000 samples"):
			refused++
		case a.code != http.StatusTooManyRequests:
			t.Errorf("%d %s", a.code, a.body)
		}
	}
	if refused == 0 {
		t.Error("no answer named the bound")
	}
	// The peak must measure evaluation too, not an idle process: two of
	// the largest queries the bound admits comfortably (432,000 steps
	// each), at once, as many as the endpoint runs, both answered.
	const heavy = `{"query": "count_over_time(vector(1)[5d:1s])"}`
	for range 2 {
		go func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(heavy))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers <- answer{code: resp.StatusCode, body: string(b)}
		}()
	}
	for range 2 {
		if a := <-answers; a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "432000") {
			t.Fatalf("an admitted query: %d %s %v", a.code, a.body, a.err)
		}
	}
	b, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	peak := -1
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			peak, err = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(line, err)
			}
		}
	}
	t.Logf("peak resident memory of the watch: %d kB", peak)
	if peak < 0 || peak >= 300<<10 {
		t.Fatalf("peak resident memory %d kB, want under 300 MB", peak)
	}
	w.stop(t, 10*time.Second)
}
