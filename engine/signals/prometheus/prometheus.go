// Package prometheus is the signal source that asks a Prometheus server:
// each query goes to its HTTP API (client_golang's API client) at the
// engine's time, with a timeout, and comes back as the embedded source's
// results do: NaN and Inf dropped and counted, never turned into 0.
package prometheus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// Config says how to reach the server. Credentials come from the
// operator (flags, files), never from a spec.
type Config struct {
	URL     string
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
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecret+1))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, path, err)
	}
	if len(b) > maxSecret {
		return "", fmt.Errorf("%s %s: larger than %d bytes", what, path, maxSecret)
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
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tlsCfg, Proxy: http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}
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

// Query evaluates expr at at on the server. A server that does not answer
// within the timeout, or answers an error, is an error (the decision that
// needed the value holds); warnings are logged once each.
func (s *Source) Query(ctx context.Context, expr string, at time.Time) (signals.Result, error) {
	res := signals.Result{Expr: expr, At: at}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, warnings, err := s.api.Query(ctx, expr, at, v1.WithTimeout(s.timeout))
	for _, w := range warnings {
		s.warn(expr, w)
	}
	if err != nil {
		var perr *v1.Error
		if errors.As(err, &perr) && perr.Type == v1.ErrBadData {
			return res, fmt.Errorf("evaluating %q: %s", expr, perr.Msg)
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
