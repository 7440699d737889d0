package scrape

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// eventually is testutil.Eventually with this package's deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	return u
}

// A target that hangs holds up nobody: while it is still being waited for,
// the good target's samples and the refused target's up == 0 are already
// in the store; each cycle asks for its config again; the loop is paced by
// its clock, not by the targets.
func TestLoopDownTargetDelaysNoOther(t *testing.T) {
	// hanging holds one signal: the scrape may reach the handler before the
	// test waits for it (a busy machine), and the send must not be lost.
	hanging, release := make(chan struct{}, 1), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/hang", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case hanging <- struct{}{}:
		default:
		}
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "queue 5\nignored 1\n") })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	refused := refusedURL(t)

	var logs testutil.Buffer
	store := embedded.NewStore(0)
	store.Request("queue")
	t0 := time.Now().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(t0.UnixMilli())
	ticks := make(chan time.Time)
	cycled := make(chan []Result, 4)
	var configs atomic.Int32
	loop := &Loop{
		Scraper: &Scraper{Store: store},
		Config: func(context.Context) Config {
			configs.Add(1)
			return Config{Interval: 5 * time.Second, Timeout: time.Minute, Targets: []Target{
				{URL: srv.URL + "/hang", Job: "j", Instance: "hang"},
				{URL: refused, Job: "j", Instance: "refused"},
				{URL: srv.URL + "/ok", Job: "j", Instance: "ok", Labels: map[string]string{"zone": "a"}},
			}}
		},
		Now:    func() time.Time { return time.UnixMilli(clock.Load()) },
		After:  func(time.Duration) <-chan time.Time { return ticks },
		Cycled: func(_ time.Time, res []Result) { cycled <- res },
		Log:    slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	defer func() { cancel(); <-done }()

	<-hanging
	eventually(t, "the good target's sample while another hangs", func() bool {
		return query(t, store, `queue`, t0)[`{instance="ok", job="j", zone="a"}`] == 5
	})
	eventually(t, "the refused target's up == 0 while another hangs", func() bool {
		return query(t, store, `up{instance="refused"}`, t0)[`{instance="refused", job="j"}`] == 0 &&
			len(query(t, store, `up{instance="refused"}`, t0)) == 1
	})
	if got := query(t, store, `ignored`, t0); len(got) != 0 {
		t.Fatalf("a name no query asked for was kept: %v", got)
	}
	select {
	case res := <-cycled:
		t.Fatalf("the cycle ended while a target still hung: %+v", res)
	default:
	}
	unblock()
	res := <-cycled
	if res[0].Up || res[1].Up || !res[2].Up || res[2].Kept != 1 || res[2].Dropped != 1 {
		t.Fatalf("first cycle: %+v", res)
	}
	if up := query(t, store, `up`, t0); up[`{instance="hang", job="j"}`] != 0 || up[`{instance="ok", job="j", zone="a"}`] != 1 {
		t.Fatalf("up after the first cycle: %v", up)
	}

	// The next cycle starts when the clock says so, stamped with its time.
	t1 := t0.Add(5 * time.Second)
	clock.Store(t1.UnixMilli())
	ticks <- t1
	<-cycled
	if configs.Load() != 2 {
		t.Fatalf("config asked %d times in two cycles", configs.Load())
	}
	if got := query(t, store, `count_over_time(queue[1m])`, t1); got[`{instance="ok", job="j", zone="a"}`] != 2 {
		t.Fatalf("samples of the good target after two cycles: %v", got)
	}
	// A target that stays down is said once, not every cycle.
	if n := strings.Count(logs.String(), "scrape target down"); n != 2 {
		t.Fatalf("%d lines about down targets over two cycles of the same two:\n%s", n, logs.String())
	}
}

// A cycle that runs past the interval starts the next at the following
// tick, not at once and not queued.
func TestLoopOverrunSkipsTicks(t *testing.T) {
	var clock atomic.Int64
	t0 := time.Now()
	clock.Store(t0.UnixNano())
	waits := make(chan time.Duration, 4)
	loop := &Loop{
		Scraper: &Scraper{Store: embedded.NewStore(0)},
		Config: func(context.Context) Config {
			// The cycle "takes" 12 s of a 5 s interval.
			clock.Add(int64(12 * time.Second))
			return Config{Interval: 5 * time.Second}
		},
		Now: func() time.Time { return time.Unix(0, clock.Load()) },
		After: func(d time.Duration) <-chan time.Time {
			waits <- d
			return make(chan time.Time)
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); loop.Run(ctx) }()
	if w := <-waits; w != 3*time.Second {
		t.Fatalf("waited %s after a 12 s cycle of a 5 s interval; want 3s (the start at 15 s)", w)
	}
	cancel()
	<-done
}
