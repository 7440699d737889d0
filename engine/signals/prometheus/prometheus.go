// Package prometheus is the signal source that asks a Prometheus server:
// each query goes to its HTTP API (client_golang's API client) at the
// engine's time, with a timeout, and comes back as the embedded source's
// results do: NaN and Inf dropped and counted, never turned into 0.
package prometheus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/setpoint-dev/setpoint/engine/signals"

	"github.com/setpoint-dev/setpoint/internal/confine"
)

// Config says how to reach the server. Credentials come from the
// operator (flags, files), never from a spec.
type Config struct {
	URL string
	// Timeout bounds one query: 5 s when zero, signals.MaxQueryTime at
	// most.
	Timeout time.Duration
	// BearerTokenFile holds a token sent as "Authorization: Bearer".
	BearerTokenFile string
	// Username and PasswordFile: basic auth.
	Username     string
	PasswordFile string
	// CAFile verifies the server; CertFile and KeyFile are a client
	// certificate.
	CAFile, CertFile, KeyFile string
	// InsecureSkipVerify skips verifying the server's certificate.
	InsecureSkipVerify bool
}

// Source queries a Prometheus server.
type Source struct {
	api     v1.API
	timeout time.Duration
	log     *slog.Logger

	mu   sync.Mutex
	said map[string]bool // warnings already logged
}

var _ signals.Source = (*Source)(nil)

// maxSecret bounds a credential file.
const maxSecret = 64 << 10

func readSecret(what, path string) (string, error) {
	// Not blocking, a regular file, bounded: a FIFO or a device named by
	// mistake must not hang start-up.
	b, _, err := confine.ReadRegular(path, maxSecret, false)
	if errors.Is(err, confine.ErrTooLarge) {
		return "", fmt.Errorf("%s %s: larger than %d bytes", what, path, maxSecret)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// New returns a source for cfg.
func New(cfg Config) (*Source, error) {
	if cfg.URL == "" {
		return nil, errors.New("prometheus: no url")
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // the operator's choice
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("prometheus CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("prometheus CA %s: no certificate in it", cfg.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("prometheus client certificate: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	var rt http.RoundTripper = capped{rt: &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}, max: signals.MaxResponseBytes}
	switch {
	case cfg.BearerTokenFile != "":
		tok, err := readSecret("prometheus bearer token file", cfg.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		rt = header{rt, "Authorization", "Bearer " + tok}
	case cfg.Username != "":
		pw := ""
		if cfg.PasswordFile != "" {
			var err error
			if pw, err = readSecret("prometheus password file", cfg.PasswordFile); err != nil {
				return nil, err
			}
		}
		rt = basic{rt, cfg.Username, pw}
	}
	c, err := api.NewClient(api.Config{Address: cfg.URL, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", cfg.URL, err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	timeout = min(timeout, signals.MaxQueryTime)
	return &Source{api: v1.NewAPI(c), timeout: timeout, log: slog.Default(), said: map[string]bool{}}, nil
}

type header struct {
	rt         http.RoundTripper
	key, value string
}

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return h.rt.RoundTrip(r)
}

type basic struct {
	rt         http.RoundTripper
	user, pass string
}

func (b basic) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.pass)
	return b.rt.RoundTrip(r)
}

// capped fails the read of a response body past max bytes: the API client
// reads an answer whole before decoding it.
type capped struct {
	rt  http.RoundTripper
	max int64
}

func (c capped) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > c.max {
		resp.Body.Close()
		return nil, c.tooLarge(fmt.Sprintf("%d bytes", resp.ContentLength))
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.max, c: c}
	return resp, nil
}

func (c capped) tooLarge(size string) *signals.BoundError {
	return &signals.BoundError{What: "the Prometheus server's answer is " + size,
		Bound: fmt.Sprintf("%d MiB", c.max>>20), Hint: "a query that selects fewer series or points answers less"}
}

type cappedBody struct {
	io.ReadCloser
	left int64
	c    capped
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.c.tooLarge("larger")
	}
	// One byte past the bound tells a body of exactly max bytes from a
	// longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.c.tooLarge("larger")
	}
	return n, err
}

// costParser parses queries for the cost check with the options the
// specs' queries are validated with.
var costParser = parser.NewParser(parser.Options{})

// Query evaluates expr at at on the server. A server that does not answer
// within the timeout, or answers an error, is an error (the decision that
// needed the value holds); warnings are logged once each. A query whose
// subqueries are past signals.MaxSamples at one series each is refused
// before it is sent (the server's memory is someone's too); one the server
// does not answer in time, or answers with more than
// signals.MaxResponseBytes, is past a bound too.
func (s *Source) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	res := signals.Result{Expr: expr, At: at}
	// A query this parser refuses may still be the server's (a newer
	// PromQL): the server says what is wrong with it.
	if e, err := costParser.ParseExpr(expr); err == nil {
		if err := signals.CheckCost(expr, e, nil); err != nil {
			return res, fmt.Errorf("evaluating %q: %w", expr, err)
		}
	}
	late := &signals.BoundError{What: "the Prometheus server had not answered", Bound: s.timeout.String()}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, late)
	defer cancel()
	v, warnings, err := s.api.Query(ctx, expr, at, v1.WithTimeout(s.timeout))
	for _, w := range warnings {
		s.warn(expr, w)
	}
	if err != nil {
		var perr *v1.Error
		errors.As(err, &perr)
		if perr != nil && perr.Type == v1.ErrBadData {
			return res, fmt.Errorf("evaluating %q: %s", expr, perr.Msg)
		}
		if msg, ok := serverTimeout(perr); ok {
			return res, fmt.Errorf("evaluating %q: %w (%s)", expr, &signals.BoundError{What: "the Prometheus server stopped the evaluation", Bound: s.timeout.String()}, msg)
		}
		if errors.Is(context.Cause(ctx), late) && !errors.Is(err, signals.ErrBound) {
			return res, fmt.Errorf("querying prometheus for %q: %w (%v)", expr, late, err)
		}
		return res, fmt.Errorf("querying prometheus for %q: %w", expr, err)
	}
	switch x := v.(type) {
	case model.Vector:
		res.Kind = signals.Vector
		for _, smp := range x {
			f := float64(smp.Value)
			if smp.Histogram != nil || !usable(f) {
				res.Dropped++
				continue
			}
			res.Samples = append(res.Samples, signals.Sample{Labels: labelsOf(smp.Metric), Value: f})
		}
	case *model.Scalar:
		res.Kind = signals.Scalar
		if f := float64(x.Value); usable(f) {
			res.Samples = []signals.Sample{{Value: f}}
		} else {
			res.Dropped = 1
		}
	case model.Matrix:
		res.Kind = signals.Matrix
		for _, series := range x {
			smp := signals.Sample{Labels: labelsOf(series.Metric)}
			for _, p := range series.Values {
				if f := float64(p.Value); usable(f) {
					smp.Points = append(smp.Points, signals.Point{T: p.Timestamp.Time().UTC(), V: f})
				}
			}
			if len(smp.Points) == 0 {
				res.Dropped++
				continue
			}
			res.Samples = append(res.Samples, smp)
		}
	default:
		return res, fmt.Errorf("%q evaluates to a %s; a vector, scalar or matrix is needed", expr, v.Type())
	}
	sort.Slice(res.Samples, func(i, j int) bool { return res.Samples[i].Labels.String() < res.Samples[j].Labels.String() })
	return res, nil
}

// serverTimeout says whether the server stopped a query at the timeout it
// was sent, and its message. The server answers that with a 503, which
// the client reports as a server error with the body left undecoded.
func serverTimeout(perr *v1.Error) (string, bool) {
	switch {
	case perr == nil:
		return "", false
	case perr.Type == v1.ErrTimeout:
		return perr.Msg, true
	case perr.Type != v1.ErrServer:
		return "", false
	}
	var body struct {
		ErrorType v1.ErrorType `json:"errorType"`
		Error     string       `json:"error"`
	}
	if json.Unmarshal([]byte(perr.Detail), &body) != nil || body.ErrorType != v1.ErrTimeout {
		return "", false
	}
	return body.Error, true
}

func usable(f float64) bool { return signals.Usable(f) }

func labelsOf(m model.Metric) signals.Labels {
	out := make(signals.Labels, len(m))
	for k, v := range m {
		if k != model.MetricNameLabel {
			out[string(k)] = string(v)
		}
	}
	return out
}

// warn logs a server's warning about a query once.
func (s *Source) warn(expr, w string) {
	s.mu.Lock()
	key := expr + "\x00" + w
	first := !s.said[key]
	if first && len(s.said) < 1000 {
		s.said[key] = true
	}
	s.mu.Unlock()
	if first {
		s.log.Warn("prometheus warns about a query", "query", expr, "warning", w)
	}
}
