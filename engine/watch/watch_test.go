package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
)

const envYAML = `apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: test}
spec:
  providers:
    - name: kubernetes
  tick: 5s
`

// nfr is one NFR document; rev tells versions apart.
func nfr(name string, rev int) string {
	return fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: %s, namespace: shop, labels: {rev: "%d"}}
spec:
  target: {kind: Deployment, name: %s}
  throughput: {minRPS: 100}
`, name, rev, name)
}

func key(name string) string { return "NFR/shop/" + name }

func write(t *testing.T, dir, name string, docs ...string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rev returns the rev label of the spec named name in set, "" if absent.
func rev(set Set, name string) string {
	for _, d := range set.Specs {
		if d.Head().ID() == key(name) {
			return d.Head().Metadata.Labels["rev"]
		}
	}
	return ""
}

type batch struct {
	keys   []string
	reason string
	set    Set
	now    time.Time
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// logSink is a slog handler that hands records to the test.
type logSink struct{ ch chan logRecord }

func (s logSink) Enabled(context.Context, slog.Level) bool { return true }
func (s logSink) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	select {
	case s.ch <- rec:
	default:
	}
	return nil
}
func (s logSink) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s logSink) WithGroup(string) slog.Handler      { return s }

type harness struct {
	dir     string
	w       *Watcher
	batches chan batch
	logs    chan logRecord
	// wall is the debounce's clock: fake, so no debounce fires because
	// the machine was slow between two events the test meant as one
	// burst. With drive set, waiting for a batch or a log fires whatever
	// debounce is armed (the test's writes are done by then); without,
	// no debounce ever fires.
	wall  *FakeClock
	drive bool

	mu      sync.Mutex
	results func(b batch) map[string]Result
}

// newHarness makes a spec directory with an Environment and a Watcher on
// it; clk nil is the wall clock for the queue and the tick. The debounce
// runs on a fake clock either way: with clk nil it fires when the test
// waits for what it brings, with a clk never.
func newHarness(t *testing.T, clk Clock) *harness {
	t.Helper()
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		dir:     t.TempDir(),
		batches: make(chan batch, 100),
		logs:    make(chan logRecord, 10000),
		wall:    NewFakeClock(t0),
		drive:   clk == nil,
	}
	write(t, h.dir, "env.yaml", envYAML)
	h.w = &Watcher{
		Dir:      h.dir,
		Loader:   l,
		Debounce: 50 * time.Millisecond,
		Log:      slog.New(logSink{h.logs}),
		Clock:    clk,
		wall:     h.wall,
	}
	h.w.Reconcile = func(ctx context.Context, set Set, keys []string, reason string) map[string]Result {
		b := batch{keys: keys, reason: reason, set: set, now: h.w.clock().Now()}
		h.batches <- b
		h.mu.Lock()
		f := h.results
		h.mu.Unlock()
		if f == nil {
			return nil
		}
		return f(b)
	}
	return h
}

func (h *harness) setResults(f func(b batch) map[string]Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.results = f
}

// run starts Run and returns a function that stops it and waits.
func (h *harness) run(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := recv(t, done); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func (h *harness) next(t *testing.T) batch {
	t.Helper()
	return driven(t, h, h.batches)
}

// fire fires the armed debounce of a driven harness.
func (h *harness) fire() {
	if !h.drive || h.wall == nil {
		return
	}
	if d := h.wall.Deadlines(); len(d) > 0 {
		h.wall.Set(d[len(d)-1])
	}
}

// driven is recv that meanwhile fires the debounce of a driven harness.
func driven[T any](t *testing.T, h *harness, ch <-chan T) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case v := <-ch:
			return v
		case <-poll.C:
			h.fire()
		case <-deadline:
			t.Fatal("timed out")
		}
	}
}

// expect takes the next batch and checks its keys and reason.
func (h *harness) expect(t *testing.T, reason string, keys ...string) batch {
	t.Helper()
	b := h.next(t)
	if !slices.Equal(b.keys, keys) || b.reason != reason {
		t.Fatalf("batch %v %q, want %v %q", b.keys, b.reason, keys, reason)
	}
	return b
}

// waitLog waits for a record with this message and, if file is set, file
// attribute, firing the debounce of a driven harness meanwhile.
func (h *harness) waitLog(t *testing.T, msg, file string) logRecord {
	t.Helper()
	return h.waitLogOf(t, msg, file, true)
}

// waitLogHeld is waitLog that leaves the debounce alone.
func (h *harness) waitLogHeld(t *testing.T, msg, file string) logRecord {
	t.Helper()
	return h.waitLogOf(t, msg, file, false)
}

func (h *harness) waitLogOf(t *testing.T, msg, file string, fire bool) logRecord {
	t.Helper()
	deadline := time.After(10 * time.Second)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case r := <-h.logs:
			if r.msg == msg && (file == "" || r.attrs["file"] == filepath.Join(h.dir, file)) {
				return r
			}
		case <-poll.C:
			if fire {
				h.fire()
			}
		case <-deadline:
			t.Fatalf("no log %q for %s", msg, file)
		}
	}
}

func TestWatchDebounceReconcilesOnlyTouchedSpecsOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.w.Debounce = 200 * time.Millisecond
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "b.yaml", nfr("y", 1))
	h.run(t)
	b := h.expect(t, "start", key("x"), key("y"))
	if b.set.Env == nil || rev(b.set, "x") != "1" || rev(b.set, "y") != "1" {
		t.Fatalf("start set: env %v, x %q, y %q", b.set.Env != nil, rev(b.set, "x"), rev(b.set, "y"))
	}
	// Each write is seen before the next: the burst spans several turns of
	// the watcher's loop, as an editor's would. The debounce's clock stands
	// still meanwhile (on the wall a busy machine could stretch a gap past
	// it and split the burst); it is armed, and fires once the test waits.
	for i := 2; i <= 6; i++ {
		write(t, h.dir, "a.yaml", nfr("x", i))
		h.waitLogHeld(t, "file event", "a.yaml")
	}
	if d := h.wall.Deadlines(); len(d) != 1 || !d[0].Equal(h.wall.Now().Add(200*time.Millisecond)) {
		t.Fatalf("debounce timers at %v, want one 200ms after %v", d, h.wall.Now())
	}
	b = h.expect(t, "edit of a.yaml", key("x"))
	if got := rev(b.set, "x"); got != "6" {
		t.Fatalf("x at rev %q, want the last write, 6", got)
	}
	// Nothing else came of the burst: the next batch is this one.
	h.w.Trigger("sentinel", key("y"))
	h.expect(t, "sentinel", key("y"))
}

func TestWatchBrokenEditKeepsLastGood(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "b.yaml", nfr("y", 1))
	h.run(t)
	h.expect(t, "start", key("x"), key("y"))

	// A syntax error: the last good a.yaml keeps running.
	write(t, h.dir, "a.yaml", nfr("x", 2)+"\nspec: [\n")
	h.waitLog(t, "edit rejected; the last good version keeps running", "a.yaml")
	if got := rev(h.w.Set(), "x"); got != "1" {
		t.Fatalf("x at rev %q after a broken edit, want 1", got)
	}
	// A rule across files: b.yaml may not define x too.
	write(t, h.dir, "b.yaml", nfr("y", 2), nfr("x", 3))
	r := h.waitLog(t, "edit rejected; the last good version keeps running", "b.yaml")
	if !strings.Contains(r.attrs["error"], "duplicate NFR/shop/x") {
		t.Fatalf("rejected for %s", r.attrs["error"])
	}
	if s := h.w.Set(); rev(s, "x") != "1" || rev(s, "y") != "1" {
		t.Fatalf("x %q y %q after a rejected edit, want 1 1", rev(s, "x"), rev(s, "y"))
	}
	// Moving x out of a.yaml lets the held-back b.yaml in.
	write(t, h.dir, "a.yaml", nfr("z", 1))
	b := h.expect(t, "edit of a.yaml, b.yaml", key("x"), key("y"), key("z"))
	if rev(b.set, "x") != "3" || rev(b.set, "y") != "2" || rev(b.set, "z") != "1" {
		t.Fatalf("x %q y %q z %q, want 3 2 1", rev(b.set, "x"), rev(b.set, "y"), rev(b.set, "z"))
	}
}

func TestWatchRemovedFileIsReconciled(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "sub/b.yaml", nfr("y", 1), nfr("w", 1))
	h.run(t)
	h.expect(t, "start", key("w"), key("x"), key("y"))
	if err := os.Remove(filepath.Join(h.dir, "sub/b.yaml")); err != nil {
		t.Fatal(err)
	}
	b := h.expect(t, "removal of sub/b.yaml", key("w"), key("y"))
	if len(b.set.Specs) != 1 || rev(b.set, "x") != "1" {
		t.Fatalf("set after removal: %d specs", len(b.set.Specs))
	}
	if got := b.set.Select(append(b.keys, key("x"))); len(got) != 1 || got[0].Head().ID() != key("x") {
		t.Fatalf("Select: %v", got)
	}
	// A new directory is watched, and what it holds already is read.
	write(t, h.dir, "new/c.yaml", nfr("c", 1))
	h.expect(t, "edit of new/c.yaml", key("c"))
	// A renamed-away directory takes its files with it.
	if err := os.Rename(filepath.Join(h.dir, "new"), filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Fatal(err)
	}
	h.expect(t, "removal of new/c.yaml", key("c"))
	// Hidden files and directories are not specs.
	write(t, h.dir, ".hidden/d.yaml", nfr("d", 1))
	write(t, h.dir, ".e.yaml", nfr("e", 1))
	write(t, h.dir, "a.yaml", nfr("x", 2))
	h.expect(t, "edit of a.yaml", key("x"))
}

func TestWatchTriggers(t *testing.T) {
	h := newHarness(t, nil)
	trig := make(chan string)
	h.w.Triggers = trig
	write(t, h.dir, "a.yaml", nfr("x", 1), nfr("y", 1))
	h.run(t)
	h.expect(t, "start", key("x"), key("y"))
	trig <- "event from sim: a"
	trig <- "event from sim: b"
	trig <- "event from sim: a"
	h.expect(t, "event from sim: a; event from sim: b", key("x"), key("y"))
	h.w.Trigger("event from kubernetes: x", key("x"))
	h.expect(t, "event from kubernetes: x", key("x"))
}

// A key whose Result asks to come back after d is reconciled exactly at its
// due time on the engine's clock, and a periodic tick enqueues every key.
func TestWatchRequeueAtDueTime(t *testing.T) {
	clk := NewFakeClock(t0)
	h := newHarness(t, clk)
	h.w.Tick = time.Hour
	write(t, h.dir, "a.yaml", nfr("x", 1), nfr("y", 1))
	h.setResults(func(b batch) map[string]Result {
		if b.reason == "start" {
			return map[string]Result{key("x"): {RequeueAfter: 10 * time.Second}}
		}
		return nil
	})
	h.run(t)
	h.expect(t, "start", key("x"), key("y"))
	due := t0.Add(10 * time.Second)
	waitDeadlines(t, clk, due, t0.Add(time.Hour))
	clk.Set(due.Add(-time.Millisecond))
	waitDeadlines(t, clk, due, t0.Add(time.Hour))
	clk.Set(due)
	b := h.expect(t, "requeue", key("x"))
	if !b.now.Equal(due) {
		t.Fatalf("reconciled at %v, want %v", b.now, due)
	}
	waitDeadlines(t, clk, t0.Add(time.Hour))
	clk.Set(t0.Add(time.Hour))
	h.expect(t, "tick", key("x"), key("y"))
	select {
	case b := <-h.batches:
		t.Fatalf("unexpected batch %v %q", b.keys, b.reason)
	default:
	}
}

func TestWatchErrorsRetriedTerminalNot(t *testing.T) {
	clk := NewFakeClock(t0)
	h := newHarness(t, clk)
	write(t, h.dir, "a.yaml", nfr("x", 1), nfr("y", 1))
	boom := errors.New("boom")
	h.setResults(func(b batch) map[string]Result {
		if b.reason == "start" {
			return map[string]Result{
				key("x"): {Err: boom, RequeueAfter: time.Hour},
				key("y"): {Err: fmt.Errorf("wrapped: %w", Terminal(errors.New("bad spec")))},
			}
		}
		if b.now.Before(t0.Add(300 * time.Millisecond)) {
			return map[string]Result{key("x"): {Err: boom}}
		}
		return nil
	})
	h.run(t)
	h.expect(t, "start", key("x"), key("y"))
	waitDeadlines(t, clk, t0.Add(100*time.Millisecond))
	if r := h.waitLog(t, "reconcile failed; not retried", ""); r.attrs["spec"] != key("y") {
		t.Fatalf("terminal log names %s", r.attrs["spec"])
	}
	clk.Advance(100 * time.Millisecond)
	h.expect(t, "retry", key("x"))
	waitDeadlines(t, clk, t0.Add(300*time.Millisecond))
	clk.Advance(200 * time.Millisecond)
	h.expect(t, "retry", key("x"))
	eventually(t, func() string {
		if n := h.w.Queue.Len(); n != 0 {
			return fmt.Sprintf("queue holds %d keys", n)
		}
		if n := h.w.Queue.NumRequeues(key("x")); n != 0 {
			return fmt.Sprintf("x not forgotten after success: %d", n)
		}
		return ""
	})
	if d := clk.Deadlines(); len(d) != 0 {
		t.Fatalf("timers left: %v", d)
	}
}

// dueOf returns when a waiting key is due.
func dueOf(q *Queue, key string) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if it, ok := q.waiting[key]; ok {
		return it.due, true
	}
	return time.Time{}, false
}

func TestFinish(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	w := &Watcher{Queue: q, Log: slog.New(logSink{make(chan logRecord, 10)})}
	q.AddRateLimited("c") // backoff to be forgotten
	q.Add("a", "b", "c", "d", "e")
	keys := q.tryGet()
	w.finish(keys, map[string]Result{
		"a": {Err: errors.New("x")},
		"b": {Err: Terminal(errors.New("y")), RequeueAfter: time.Second},
		"c": {RequeueAfter: 5 * time.Second},
		"d": {},
		"z": {RequeueAfter: time.Second}, // not in the batch
	})
	q.Done(keys...)
	if due, ok := dueOf(q, "a"); !ok || !due.Equal(t0.Add(100*time.Millisecond)) || q.NumRequeues("a") != 1 {
		t.Fatalf("a: due %v %v, requeues %d", due, ok, q.NumRequeues("a"))
	}
	if due, ok := dueOf(q, "c"); !ok || !due.Equal(t0.Add(5*time.Second)) || q.NumRequeues("c") != 0 {
		t.Fatalf("c: due %v %v, requeues %d", due, ok, q.NumRequeues("c"))
	}
	if q.Len() != 2 {
		t.Fatalf("Len %d, want 2 (a, c)", q.Len())
	}
	if !IsTerminal(fmt.Errorf("w: %w", Terminal(errors.New("e")))) || IsTerminal(errors.New("e")) || Terminal(nil) != nil {
		t.Fatal("IsTerminal")
	}
}

func TestWatchRunStopAndStartAgain(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "b.yaml", nfr("y", 1))
	write(t, h.dir, "c.yaml", nfr("z", 1))
	h.setResults(func(b batch) map[string]Result {
		return map[string]Result{key("x"): {RequeueAfter: time.Hour}}
	})
	stop := h.run(t)
	h.expect(t, "start", key("x"), key("y"), key("z"))
	eventually(t, func() string {
		if _, ok := dueOf(h.w.Queue, key("x")); !ok {
			return "x not requeued"
		}
		return ""
	})
	if err := h.w.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second concurrent Run: %v", err)
	}
	stop()

	// While stopped: one edit, one broken edit, one removal.
	write(t, h.dir, "a.yaml", nfr("x", 2))
	write(t, h.dir, "b.yaml", "kind: [")
	if err := os.Remove(filepath.Join(h.dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, ok := dueOf(h.w.Queue, key("x")); !ok {
		t.Fatal("the queue did not survive the stop")
	}
	h.setResults(nil)
	q := h.w.Queue
	stop = h.run(t)
	b := h.expect(t, "start", key("x"), key("y"), key("z"))
	if h.w.Queue != q {
		t.Fatal("the queue was replaced at the second start")
	}
	if rev(b.set, "x") != "2" || rev(b.set, "y") != "1" || rev(b.set, "z") != "" {
		t.Fatalf("x %q y %q z %q, want 2 1 (last good) and gone", rev(b.set, "x"), rev(b.set, "y"), rev(b.set, "z"))
	}
	h.waitLog(t, "edit rejected; the last good version keeps running", "b.yaml")
	// It keeps watching.
	write(t, h.dir, "b.yaml", nfr("y", 3))
	b = h.expect(t, "edit of b.yaml", key("y"))
	if rev(b.set, "y") != "3" {
		t.Fatalf("y %q", rev(b.set, "y"))
	}
	stop()
}

// On the wall clock a requeued key is reconciled promptly at its due time,
// however often the tick runs. The reconciler is level-triggered: before the
// due time it asks again for what remains.
func TestWatchRequeueIsPromptOnTheWall(t *testing.T) {
	h := newHarness(t, nil)
	// The tick is far away: only the requeue can bring the key back.
	h.w.Tick = time.Hour
	write(t, h.dir, "a.yaml", nfr("x", 1))
	const wait = 100 * time.Millisecond
	var due time.Time // the worker's own
	h.setResults(func(b batch) map[string]Result {
		if due.IsZero() {
			due = b.now.Add(wait)
		}
		if left := due.Sub(b.now); left > 0 {
			return map[string]Result{key("x"): {RequeueAfter: left}}
		}
		return nil
	})
	h.run(t)
	first := h.next(t)
	for due := first.now.Add(wait); ; {
		b := h.next(t)
		if b.now.Before(due) {
			continue
		}
		// A timer, not a poll: the tick is an hour away. The bound tells
		// the two apart and leaves room for a busy machine's scheduling;
		// the exact due time is TestWatchRequeueAtDueTime's, on a fake
		// clock.
		if late := b.now.Sub(due); late > time.Second || !strings.Contains(b.reason, "requeue") {
			t.Fatalf("reconciled %v after its due time (%q)", late, b.reason)
		}
		return
	}
}
func TestSubscribeResubscribes(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reasons := make(chan string, 10)
	var mu sync.Mutex
	var attempts []int
	calls := 0
	events := func(ctx context.Context, send func(string) error) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1, 3:
			return errors.New("connection refused")
		case 2:
			if err := send("e2"); err != nil {
				return err
			}
			return nil // the stream ended (a provider restart)
		default:
			if err := send(fmt.Sprintf("e%d", n)); err != nil {
				return err
			}
			<-ctx.Done()
			if err := send("late"); err == nil {
				t.Error("send after the end of ctx")
			}
			return ctx.Err()
		}
	}
	backoff := func(attempt int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, attempt)
		return 0
	}
	done := make(chan struct{})
	go func() {
		Subscribe(ctx, "sim", events, backoff, func(r string) { reasons <- r }, slog.New(logSink{make(chan logRecord, 10)}))
		close(done)
	}()
	const resub = "resubscribed to sim events"
	for _, w := range []string{resub, "e2", resub, resub, "e4"} {
		if got := recv(t, reasons); got != w {
			t.Fatalf("trigger %q, want %q", got, w)
		}
	}
	cancel()
	recv(t, done)
	mu.Lock()
	defer mu.Unlock()
	// An event delivered resets the backoff.
	if calls != 4 || !slices.Equal(attempts, []int{1, 1, 2}) {
		t.Fatalf("calls %d, backoff attempts %v; want 4, [1 1 2]", calls, attempts)
	}
}

func TestSubscribeStopsDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	waiting := make(chan struct{})
	done := make(chan struct{})
	go func() {
		Subscribe(ctx, "sim",
			func(context.Context, func(string) error) error { return errors.New("down") },
			func(int) time.Duration { close(waiting); return time.Hour },
			func(string) { t.Error("triggered") }, slog.New(logSink{make(chan logRecord, 10)}))
		close(done)
	}()
	recv(t, waiting)
	cancel()
	recv(t, done)
	if got := Backoff(time.Second, 5*time.Second); got(1) != time.Second || got(3) != 4*time.Second || got(10) != 5*time.Second {
		t.Fatalf("Backoff: %v %v %v", got(1), got(3), got(10))
	}
}

func TestSpecFileRulesAreTheLoaders(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", envYAML)
	write(t, dir, "b.yml", nfr("b", 1))
	write(t, dir, "sub/c.yaml", nfr("c", 1))
	write(t, dir, ".hidden/d.yaml", nfr("d", 1))
	write(t, dir, "cue.mod/e.yaml", nfr("e", 1))
	write(t, dir, ".f.yaml", nfr("f", 1))
	write(t, dir, "g.txt", nfr("g", 1))
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	sc, err := scanTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	// a, b, and c once: through link, met first; sub is then a directory
	// seen before. Hidden, cue.mod and non-spec files are not read.
	want := []string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yml"), filepath.Join(dir, "link", "c.yaml")}
	if !slices.Equal(sc.files, want) {
		t.Fatalf("the watcher sees %v, want %v", sc.files, want)
	}
	l, err := load.New()
	if err != nil {
		t.Fatal(err)
	}
	var loaded []string
	for _, d := range l.LoadDir(dir).Documents {
		loaded = append(loaded, d.Head().Src.Pos.File)
	}
	slices.Sort(loaded)
	if loaded = slices.Compact(loaded); !slices.Equal(loaded, want) {
		t.Fatalf("the loader reads %v, want %v", loaded, want)
	}
}

// TestWatchSetTick: a new tick period takes effect at once, counted from
// when it is set, and a tick of 0 stops ticking.
func TestWatchSetTick(t *testing.T) {
	clk := NewFakeClock(t0)
	h := newHarness(t, clk)
	h.w.Tick = time.Hour
	write(t, h.dir, "a.yaml", nfr("x", 1))
	stop := h.run(t)
	h.expect(t, "start", key("x"))
	waitDeadlines(t, clk, t0.Add(time.Hour))
	clk.Set(t0.Add(time.Minute))
	h.w.SetTick(10 * time.Second)
	h.waitLog(t, "tick changed", "")
	waitDeadlines(t, clk, t0.Add(time.Minute+10*time.Second))
	clk.Set(t0.Add(time.Minute + 10*time.Second))
	h.expect(t, "tick", key("x"))
	h.w.SetTick(0)
	h.waitLog(t, "tick changed", "")
	waitDeadlines(t, clk)
	stop()
	h.waitLog(t, "stopped watching", "")
}

// TestWatchLogsFileChanges: what watch saw is said at the default level,
// for a new file deep in new directories and for a removal.
func TestWatchLogsFileChanges(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	h.run(t)
	h.expect(t, "start", key("x"))
	write(t, h.dir, "new/deeper/still/c.yaml", nfr("c", 1))
	h.expect(t, "edit of new/deeper/still/c.yaml", key("c"))
	r := h.waitLog(t, "spec files changed", "")
	if r.level != slog.LevelInfo || r.attrs["edited"] != "new/deeper/still/c.yaml" {
		t.Fatalf("log: %+v", r)
	}
	if err := os.Remove(filepath.Join(h.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	h.expect(t, "removal of a.yaml", key("x"))
	if r := h.waitLog(t, "spec files changed", ""); r.attrs["removed"] != "a.yaml" {
		t.Fatalf("log: %+v", r)
	}
}

// TestWatchSetIncomplete: while a spec file does not load, the set says
// so (a spec missing from it may be broken, not deleted).
func TestWatchSetIncomplete(t *testing.T) {
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", nfr("x", 1))
	write(t, h.dir, "b.yaml", "kind: [")
	h.run(t)
	if b := h.expect(t, "start", key("x")); !b.set.Incomplete {
		t.Fatal("a file that does not load: the set must say it is incomplete")
	}
	write(t, h.dir, "b.yaml", nfr("y", 1))
	if b := h.expect(t, "edit of b.yaml", key("y")); b.set.Incomplete {
		t.Fatal("fixed: the set is complete")
	}
	write(t, h.dir, "a.yaml", "kind: [")
	h.waitLog(t, "edit rejected; the last good version keeps running", "a.yaml")
	if s := h.w.Set(); !s.Incomplete || rev(s, "x") != "1" {
		t.Fatalf("a broken edit: incomplete, last good kept: %+v", s)
	}
	if err := os.Remove(filepath.Join(h.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if b := h.expect(t, "removal of a.yaml", key("x")); b.set.Incomplete {
		t.Fatal("the broken file is gone: the set is complete")
	}
}
