// Package scrape fills the embedded store from Prometheus-format endpoints:
// each cycle GETs every target with its own timeout (a few at once),
// parses the text or OpenMetrics exposition with Prometheus' own parser
// (model/textparse: expfmt has no OpenMetrics decoder), keeps only the
// metric names some query asked for, and records up{job,instance}: 1 for a
// target that answered, 0 for one that did not. A target that is down is a
// sample, never a stall of the loop. Loop runs cycles beside a watch's
// reconciles; OnDemand scrapes for a one-shot command's queries.
package scrape

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
)

// Target is one endpoint.
type Target struct {
	// URL of its metrics ("http://10.0.0.7:9090/metrics").
	URL string
	// Job names it in the samples' job label; Instance (default the URL's
	// host) in instance.
	Job, Instance string
	// Labels go on every sample of the target, up included (a pod's
	// namespace and name); they win over job and instance.
	Labels map[string]string
}

// key tells targets apart across cycles (their up series).
func (t Target) key() string { return t.Job + " " + t.URL }

// Result is what one target's scrape gave.
type Result struct {
	Target  Target
	Up      bool
	Kept    int // samples of requested names recorded
	Dropped int // samples of names nobody asked for
	Err     error
	Took    time.Duration
}

// Scraper scrapes targets into a store.
type Scraper struct {
	Store   *embedded.Store
	Client  *http.Client
	Timeout time.Duration
	// MaxBody bounds one target's response.
	MaxBody int64
	// Workers is how many targets are scraped at once.
	Workers int
}

// Defaults.
const (
	DefaultTimeout = 4 * time.Second
	DefaultMaxBody = 16 << 20
	DefaultWorkers = 16
)

var errTooBig = errors.New("response larger than the limit")

// defaultClient follows no redirect and uses no proxy: a target (a pod,
// whose owner writes its annotations and runs its server) must not be able
// to send setpoint to another address than the one it was found at. A
// redirect is an answer other than 200: the target is down.
var defaultClient = &http.Client{
	Transport: func() http.RoundTripper {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		return t
	}(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Once scrapes every target once at now (the samples' time) and returns
// one result per target, in order.
func (s *Scraper) Once(ctx context.Context, targets []Target, now time.Time) []Result {
	out := make([]Result, len(targets))
	workers := s.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 64<<10)
			for i := range next {
				out[i], buf = s.one(ctx, targets[i], now, buf)
			}
		}()
	}
	for i := range targets {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func (s *Scraper) one(ctx context.Context, t Target, now time.Time, buf []byte) (Result, []byte) {
	start := time.Now()
	res := Result{Target: t}
	instance := t.Instance
	if instance == "" {
		instance = hostOf(t.URL)
	}
	ts := now.UnixMilli()
	own := labels.NewBuilder(labels.EmptyLabels())
	own.Set("job", t.Job)
	own.Set("instance", instance)
	for k, v := range t.Labels {
		own.Set(k, v)
	}
	body, ctype, err := s.fetch(ctx, t.URL, buf)
	if err == nil {
		res.Kept, res.Dropped, err = s.ingest(body, ctype, own.Labels(), ts)
	}
	res.Err, res.Up = err, err == nil
	up := 0.0
	if res.Up {
		up = 1
	}
	// up is always kept: it says whether the others could be.
	own.Set("__name__", "up")
	_, _ = s.Store.Append(own.Labels(), ts, up)
	res.Took = time.Since(start)
	return res, body[:0]
}

func (s *Scraper) fetch(ctx context.Context, url string, buf []byte) ([]byte, string, error) {
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return buf, "", err
	}
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.8,*/*;q=0.1")
	c := s.Client
	if c == nil {
		c = defaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return buf, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return buf, "", fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	max := s.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	w := byteWriter{b: buf[:0]}
	n, err := io.Copy(&w, io.LimitReader(resp.Body, max+1))
	if err != nil {
		return w.b, "", err
	}
	if n > max {
		return w.b, "", fmt.Errorf("%s: %w (%d bytes)", url, errTooBig, max)
	}
	return w.b, resp.Header.Get("Content-Type"), nil
}

type byteWriter struct{ b []byte }

func (w *byteWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// ingest parses an exposition and appends the requested samples, labelled
// with the target's own labels (job, instance and its Labels). A label the
// target exposes under one of those names is kept as exported_NAME, as
// Prometheus does without honor_labels: a pod cannot pass its samples off
// as another namespace's, and an exporter's labels (kube-state-metrics
// names other pods) are not lost.
func (s *Scraper) ingest(body []byte, ctype string, own labels.Labels, ts int64) (kept, dropped int, err error) {
	p, err := textparse.New(body, ctype, nil, textparse.ParserOptions{})
	if err != nil && p == nil {
		return 0, 0, fmt.Errorf("parsing the exposition: %w", err)
	}
	var lb labels.Labels
	builder := labels.NewBuilder(labels.EmptyLabels())
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return kept, dropped, nil
		}
		if err != nil {
			return kept, dropped, fmt.Errorf("parsing the exposition: %w", err)
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, tsp, v := p.Series()
		p.Labels(&lb)
		if !s.Store.Requested(lb.Get("__name__")) {
			dropped++
			continue
		}
		builder.Reset(lb)
		own.Range(func(l labels.Label) {
			if v := lb.Get(l.Name); v != "" {
				builder.Set("exported_"+l.Name, v)
			}
			builder.Set(l.Name, l.Value)
		})
		t := ts
		if tsp != nil {
			t = *tsp
		}
		if t > ts+maxFuture.Milliseconds() || t < ts-maxPast.Milliseconds() {
			// A target's own timestamp far from the scrape's: the store
			// would move its time (and drop what it holds) for it.
			dropped++
			continue
		}
		if kept >= MaxSamplesPerTarget {
			return kept, dropped, fmt.Errorf("over %d samples of requested metrics in one scrape", MaxSamplesPerTarget)
		}
		if _, err := s.Store.AppendScraped(builder.Labels(), t, v); err != nil {
			dropped++
			continue
		}
		kept++
	}
}

// Bounds on what one target's scrape may put in the store: timestamps
// near the scrape's own, and a number of samples (as Prometheus'
// sample_limit, the target counts as down beyond it).
const (
	maxFuture           = time.Minute
	maxPast             = 10 * time.Minute
	MaxSamplesPerTarget = 100_000
)

func hostOf(url string) string {
	rest := url
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
