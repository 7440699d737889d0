package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/engine/signals"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

const (
	// maxTokenFile bounds the token file: a token is one line, and a
	// mistyped path (a log, a binary) must not be read whole.
	maxTokenFile = 4 << 10
	// maxEvalBody bounds an eval request: a query is short, and the
	// server must not buffer whatever a client sends.
	maxEvalBody = 64 << 10
	// evalTimeout bounds one evaluation when the client waits longer
	// than any query should take; each source has its own bound within
	// it.
	evalTimeout = signals.MaxQueryTime
	// maxEvals bounds the evaluations in flight: each may hold up to
	// signals.MaxSamples, in the reconciler's memory, on its cores.
	maxEvals = 2
)

// debugConfig is what watch's --debug-addr and --debug-token-file ask for,
// checked before anything starts; nil when neither the debug endpoints nor
// the health server (which serves /metrics too) is on.
type debugConfig struct {
	addr string // "" serves no debug endpoints: only the metrics are kept
	// token is the SHA-256 of the bearer token, nil for none (loopback).
	// Comparing digests keeps the comparison constant-time whatever the
	// length of the token a client sends.
	token   *[sha256.Size]byte
	metrics *selfMetrics
}

// newDebugConfig refuses a bind address reachable from other hosts
// unless a token guards it: the endpoints evaluate any PromQL and show
// what the store holds.
func newDebugConfig(addr, tokenFile string) (*debugConfig, error) {
	if addr == "" {
		if tokenFile != "" {
			return nil, errors.New("--debug-token-file needs --debug-addr")
		}
		return nil, nil
	}
	c := &debugConfig{addr: addr, metrics: watchMetrics()}
	if tokenFile != "" {
		tok, err := readDebugToken(tokenFile)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(tok)
		c.token = &sum
		return c, nil
	}
	loop, err := isLoopback(addr)
	if err != nil {
		return nil, err
	}
	if !loop {
		return nil, fmt.Errorf("--debug-addr %s is not a loopback address (127.0.0.0/8, ::1, localhost; an empty host is every interface): pass --debug-token-file to serve the debug endpoints there", addr)
	}
	return c, nil
}

// isLoopback says whether addr (host:port) binds to loopback only. A host
// name other than localhost may resolve anywhere, so it is not.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--debug-addr %q: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, nil
	}
	return ip.Unmap().IsLoopback(), nil
}

// readDebugToken reads a bearer token: trimmed, since editors and
// `echo > file` add a newline no client sends.
//
// The file is opened without blocking: opening a FIFO for reading waits
// for a writer, in a system call no signal ends, so a mistyped path would
// hang watch before it serves anything, deaf to SIGTERM. Symlinks are
// followed (a Secret volume's file is a link through ..data), and what was
// opened, not the path, is checked: a regular file, not readable by every
// user. Group-readable is allowed: a Secret mounted with an fsGroup is
// 0440.
func readDebugToken(path string) ([]byte, error) {
	b, fi, err := confine.ReadRegular(path, maxTokenFile, false)
	var nr *confine.NotRegularError
	switch {
	case errors.As(err, &nr):
		return nil, fmt.Errorf("--debug-token-file %s: %s, not a regular file", path, confine.Kind(nr.Mode))
	case errors.Is(err, confine.ErrTooLarge):
		return nil, fmt.Errorf("--debug-token-file %s: larger than %d bytes", path, maxTokenFile)
	case err != nil:
		return nil, fmt.Errorf("--debug-token-file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o004 != 0 {
		return nil, fmt.Errorf("--debug-token-file %s: readable by every user (mode %04o): chmod o-r it (owner- or group-readable is enough)", path, perm)
	}
	tok := bytes.TrimSpace(b)
	if len(tok) == 0 {
		return nil, fmt.Errorf("--debug-token-file %s: empty", path)
	}
	return tok, nil
}

// selfMetrics is what the reconcile path records into; nil when off.
func (c *debugConfig) selfMetrics() *selfMetrics {
	if c == nil {
		return nil
	}
	return c.metrics
}

// serve listens and serves the debug endpoints until ctx ends or stop is
// called; stop returns once the server has stopped. A bind failure is
// returned, so a watch asked for endpoints it cannot serve does not start.
func (c *debugConfig) serve(ctx context.Context, src signals.Source, now func() time.Time) (addr net.Addr, stop func(), err error) {
	if c == nil || c.addr == "" {
		return nil, func() {}, nil
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--debug-addr: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	d := newDebugServer(src, now, c.metrics.handler(), c.token)
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		// Requests in flight end with the watch rather than hold up its
		// shutdown.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("debug server", "addr", ln.Addr().String(), "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}()
	slog.Info("serving debug endpoints", "addr", ln.Addr().String(), "token", c.token != nil)
	return ln.Addr(), func() { cancel(); <-done }, nil
}

// debugServer is the HTTP side of the debug endpoints.
type debugServer struct {
	source  signals.Source
	now     func() time.Time
	metrics http.Handler
	token   *[sha256.Size]byte
	// evals holds a token per evaluation in flight: the bound is the
	// server's, however many handlers serve it.
	evals chan struct{}
}

func newDebugServer(src signals.Source, now func() time.Time, metrics http.Handler, token *[sha256.Size]byte) *debugServer {
	return &debugServer{source: src, now: now, metrics: metrics, token: token, evals: make(chan struct{}, maxEvals)}
}

func (d *debugServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/promql/eval", d.eval)
	mux.Handle("/debug/store", onlyGet(http.HandlerFunc(d.store)))
	mux.Handle("/metrics", onlyGet(d.metrics))
	mux.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		writeProblem(rw, http.StatusNotFound, fmt.Sprintf("no endpoint %s: there are POST /debug/promql/eval, GET /debug/store and GET /metrics", r.URL.Path))
	})
	return d.authorize(mux)
}

// authorize lets through requests with the bearer token, when there is
// one.
func (d *debugServer) authorize(next http.Handler) http.Handler {
	if d.token == nil {
		return next
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		// The scheme is case-insensitive (RFC 9110 §11.1).
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], d.token[:]) != 1 {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="setpoint debug"`)
			writeProblem(rw, http.StatusUnauthorized, "a valid bearer token is required (Authorization: Bearer <the --debug-token-file's token>)")
			return
		}
		next.ServeHTTP(rw, r)
	})
}

func onlyGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			rw.Header().Set("Allow", "GET, HEAD")
			writeProblem(rw, http.StatusMethodNotAllowed, r.Method+" is not allowed: use GET")
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// problem is an RFC 9457 problem details object. The type is about:blank
// throughout: the status says what kind of problem it is, the detail says
// the rest.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func writeProblem(rw http.ResponseWriter, status int, detail string) {
	rw.Header().Set("Content-Type", "application/problem+json")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	rw.WriteHeader(status)
	_ = jsonOut(rw).Encode(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// evalRequest is the body of POST /debug/promql/eval. Time is RFC 3339 or
// unix seconds, as a JSON string or number.
type evalRequest struct {
	Query string          `json:"query"`
	Time  json.RawMessage `json:"time"`
}

// defaultParser checks queries for sources that do not parse themselves
// (a Prometheus server): a query that does not parse is the client's
// mistake, not a failure of the source.
var defaultParser = parser.NewParser(parser.Options{})

func (d *debugServer) eval(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", "POST")
		writeProblem(rw, http.StatusMethodNotAllowed, r.Method+" is not allowed: POST a JSON body {\"query\": \"...\", \"time\": \"...\"}")
		return
	}
	req, err := decodeEval(http.MaxBytesReader(rw, r.Body, maxEvalBody))
	if err != nil {
		writeProblem(rw, http.StatusBadRequest, err.Error())
		return
	}
	at, err := evalTime(req.Time, d.now)
	if err != nil {
		writeProblem(rw, http.StatusBadRequest, err.Error())
		return
	}
	// The source's own parser, when it has one, has the options it
	// evaluates with.
	parse := func(q string) error { _, err := defaultParser.ParseExpr(q); return err }
	if p, ok := d.source.(interface {
		Parse(string) ([]string, error)
	}); ok {
		parse = func(q string) error { _, err := p.Parse(q); return err }
	}
	if err := parse(req.Query); err != nil {
		writeProblem(rw, http.StatusUnprocessableEntity, err.Error())
		return
	}
	// Refused rather than queued: a queue would hold the requests, and
	// their clients, that the bound is there to turn away.
	select {
	case d.evals <- struct{}{}:
		defer func() { <-d.evals }()
	default:
		rw.Header().Set("Retry-After", "1")
		writeProblem(rw, http.StatusTooManyRequests, fmt.Sprintf("%d evaluations are running, the most at once: try again when one has finished", maxEvals))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), evalTimeout)
	defer cancel()
	res, err := d.source.Query(ctx, req.Query, at)
	if err != nil {
		if pe, ok := errors.AsType[parser.ParseErrors](err); ok {
			writeProblem(rw, http.StatusUnprocessableEntity, pe.Error())
			return
		}
		if errors.Is(err, signals.ErrBound) {
			// The query asks too much: the client's to change, and
			// nothing for the operator to look into.
			writeProblem(rw, http.StatusUnprocessableEntity, err.Error())
			return
		}
		slog.Warn("debug eval", "query", req.Query, "err", err)
		writeProblem(rw, http.StatusInternalServerError, err.Error())
		return
	}
	if len(res.Samples) == 0 && res.Dropped > 0 {
		// The source never hands out NaN or Inf (a decision would act on
		// them): a result made only of them is not a value.
		writeProblem(rw, http.StatusUnprocessableEntity, fmt.Sprintf("%s at %s: the result is NaN or ±Inf (%s)", req.Query, at.UTC().Format(time.RFC3339), res.NoData()))
		return
	}
	// The shape of `setpoint query --json`, by the same code, so a script
	// reads both alike.
	var buf bytes.Buffer
	c := &cobra.Command{}
	c.SetOut(&buf)
	if err := printResultJSON(c, res); err != nil {
		writeProblem(rw, http.StatusInternalServerError, fmt.Sprintf("encoding the result: %v", err))
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	_, _ = rw.Write(buf.Bytes())
}

// decodeEval reads one JSON object and nothing after it; unknown fields
// are refused, as a misspelt "time" would otherwise silently mean now.
func decodeEval(body io.Reader) (evalRequest, error) {
	var req evalRequest
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil {
		if _, tail := dec.Token(); !errors.Is(tail, io.EOF) {
			err = errors.New("more than one JSON value")
			if tail != nil {
				err = tail
			}
		}
	}
	if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
		return req, fmt.Errorf("the body is larger than %d KiB", maxEvalBody>>10)
	}
	if err != nil {
		return req, fmt.Errorf("the body is not a JSON object {\"query\": \"...\", \"time\": \"...\"}: %w", err)
	}
	if strings.TrimSpace(req.Query) == "" {
		return req, errors.New("missing query")
	}
	return req, nil
}

// evalTime reads the request's time; none is now on the watch's clock
// (virtual time on the sim world).
func evalTime(raw json.RawMessage, now func() time.Time) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return now(), nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("time: %w", err)
		}
		if s == "" {
			return now(), nil
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t, nil
		}
	} else {
		s = string(raw)
	}
	f, err := strconv.ParseFloat(s, 64)
	// Beyond ±2^40 s (some 35,000 years) a time is a mistake, and its
	// conversion to nanoseconds would overflow.
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1<<40 {
		return time.Time{}, fmt.Errorf("time %s: want RFC 3339 (2006-01-02T15:04:05Z) or unix seconds", raw)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
}

// store says what the embedded store holds and which metric names it
// keeps.
func (d *debugServer) store(rw http.ResponseWriter, _ *http.Request) {
	src, ok := d.source.(*embedded.Source)
	if !ok {
		what := fmt.Sprintf("%T", d.source)
		if _, prom := d.source.(*promsource.Source); prom {
			what = "a Prometheus server"
		}
		writeProblem(rw, http.StatusNotFound, fmt.Sprintf("the signal source is %s, not the embedded store", what))
		return
	}
	st := src.Store.Stats()
	out := struct {
		Requested []string `json:"requested"`
		// RequestedLeftOut counts the names the store stopped keeping
		// to stay within embedded.MaxRequested: the listing holds at
		// most that many, and a missing name may be one of these.
		RequestedLeftOut int    `json:"requestedLeftOut"`
		Series           int    `json:"series"`
		Points           int    `json:"points"`
		Oldest           string `json:"oldest,omitempty"`
		Newest           string `json:"newest,omitempty"`
	}{Series: st.Series, Points: st.Samples}
	out.Requested, out.RequestedLeftOut = src.Store.RequestedNames()
	if out.Requested == nil {
		out.Requested = []string{}
	}
	if st.Series > 0 {
		out.Oldest = time.UnixMilli(st.MinT).UTC().Format(time.RFC3339Nano)
		out.Newest = time.UnixMilli(st.MaxT).UTC().Format(time.RFC3339Nano)
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = jsonOut(rw).Encode(out)
}
