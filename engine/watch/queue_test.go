package watch

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// getAsync runs Get in a goroutine and delivers its keys.
func getAsync(ctx context.Context, q *Queue) <-chan []string {
	ch := make(chan []string, 1)
	go func() {
		keys, ok := q.Get(ctx)
		if !ok {
			keys = nil
		}
		ch <- keys
	}()
	return ch
}

// waitDeadlines waits until the fake clock has timers at exactly want.
func waitDeadlines(t *testing.T, clk *FakeClock, want ...time.Time) {
	t.Helper()
	eventually(t, func() string {
		if got := clk.Deadlines(); !slices.EqualFunc(got, want, time.Time.Equal) {
			return fmt.Sprintf("timers at %v, have %v", want, got)
		}
		return ""
	})
}

// eventually polls check until it returns "" or a deadline passes, then
// fails with its last answer.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", msg)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

func TestQueueDeduplicates(t *testing.T) {
	q := NewQueue(NewFakeClock(t0))
	q.Add("b", "a", "a")
	q.Add("a")
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
	if got := q.tryGet(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("got %v, want [a b]", got)
	}
	if got := q.tryGet(); got != nil {
		t.Fatalf("handed out again: %v", got)
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d after Get, want 0", q.Len())
	}
}

func TestQueueAddDuringProcessingComesBackAfterDone(t *testing.T) {
	q := NewQueue(NewFakeClock(t0))
	q.Add("a")
	if got := q.tryGet(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %v", got)
	}
	q.Add("a", "b") // a is being processed
	if got := q.tryGet(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("while a is processed got %v, want [b]", got)
	}
	if got := q.tryGet(); got != nil {
		t.Fatalf("a handed out while processed: %v", got)
	}
	q.Done("b")
	if got := q.tryGet(); got != nil {
		t.Fatalf("a handed out before its Done: %v", got)
	}
	// A Get blocked meanwhile (waiting for c) is woken by Done.
	clk := q.Clock().(*FakeClock)
	q.AddAfter("c", time.Hour)
	ch := getAsync(t.Context(), q)
	waitDeadlines(t, clk, t0.Add(time.Hour))
	q.Done("a")
	if got := recv(t, ch); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after Done got %v, want [a]", got)
	}
}

func TestQueueEarliestAddAfterWins(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	q.AddAfter("a", 10*time.Second)
	q.AddAfter("a", 3*time.Second)
	q.AddAfter("a", 7*time.Second)
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1", q.Len())
	}
	ch := getAsync(t.Context(), q)
	waitDeadlines(t, clk, t0.Add(3*time.Second))
	clk.Advance(3 * time.Second)
	if got := recv(t, ch); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %v", got)
	}
	q.Done("a")
	if q.Len() != 0 {
		t.Fatalf("the later adds are still queued: Len = %d", q.Len())
	}
	// Add makes a waiting key due now; AddAfter does not delay a due key.
	q.AddAfter("b", time.Minute)
	q.Add("b")
	q.AddAfter("b", time.Minute)
	if got := q.tryGet(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("got %v, want [b] now", got)
	}
	q.Done("b")
	if q.Len() != 0 {
		t.Fatalf("Len = %d, want 0", q.Len())
	}
}

// The key is handed out exactly at its due time: the queue waits on a timer
// for that instant, and nothing earlier wakes it.
func TestQueueHandsOutAtDueTimeNotBefore(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	q.AddAfter("a", 180*time.Second)
	ch := getAsync(t.Context(), q)
	due := t0.Add(180 * time.Second)
	waitDeadlines(t, clk, due)
	clk.Set(due.Add(-time.Nanosecond))
	if got := q.tryGet(); got != nil {
		t.Fatalf("handed out 1ns early: %v", got)
	}
	waitDeadlines(t, clk, due) // still waiting for the due time, not woken early
	clk.Set(due)
	if got := recv(t, ch); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("got %v", got)
	}
	if now := clk.Now(); !now.Equal(due) {
		t.Fatalf("handed out at %v, want %v", now, due)
	}
}

func TestQueueGetReturnsEveryDueKeyAtOnce(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	q.AddAfter("c", 5*time.Second)
	q.AddAfter("a", 5*time.Second)
	q.AddAfter("b", 7*time.Second)
	q.AddAfter("d", 9*time.Second)
	ch := getAsync(t.Context(), q)
	waitDeadlines(t, clk, t0.Add(5*time.Second))
	clk.Advance(7 * time.Second)
	if got := recv(t, ch); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("got %v, want [a b c]", got)
	}
	q.Add("x", "e")
	if got := q.tryGet(); !slices.Equal(got, []string{"e", "x"}) {
		t.Fatalf("got %v, want [e x]", got)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (d)", q.Len())
	}
}

func TestQueueBackoffGrowsAndForgetResets(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	q.SetBackoff(100*time.Millisecond, time.Second)
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		w *= time.Millisecond
		q.AddRateLimited("a")
		start := clk.Now()
		ch := getAsync(t.Context(), q)
		waitDeadlines(t, clk, start.Add(w))
		clk.Advance(w)
		if got := recv(t, ch); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("retry %d: got %v", i, got)
		}
		q.Done("a")
	}
	if n := q.NumRequeues("a"); n != len(want) {
		t.Fatalf("NumRequeues = %d, want %d", n, len(want))
	}
	q.Forget("a")
	if n := q.NumRequeues("a"); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d", n)
	}
	q.AddRateLimited("a")
	ch := getAsync(t.Context(), q)
	waitDeadlines(t, clk, clk.Now().Add(100*time.Millisecond))
	clk.Advance(100 * time.Millisecond)
	recv(t, ch)
}

func TestQueueDefaultBackoff(t *testing.T) {
	q := NewQueue(nil)
	if got := q.backoff(0); got != 100*time.Millisecond {
		t.Fatalf("first backoff %v", got)
	}
	if got := q.backoff(100); got != 5*time.Minute {
		t.Fatalf("capped backoff %v", got)
	}
}

func TestQueueGetEndsWithContextAndShutDown(t *testing.T) {
	q := NewQueue(NewFakeClock(t0))
	ctx, cancel := context.WithCancel(t.Context())
	ch := getAsync(ctx, q)
	cancel()
	if got := recv(t, ch); got != nil {
		t.Fatalf("got %v", got)
	}
	ch = getAsync(t.Context(), q)
	q.ShutDown()
	if got := recv(t, ch); got != nil {
		t.Fatalf("got %v", got)
	}
	q.Add("a")
	if _, ok := q.Get(t.Context()); ok {
		t.Fatal("Get after ShutDown")
	}
}

func TestQueueReasons(t *testing.T) {
	clk := NewFakeClock(t0)
	q := NewQueue(clk)
	q.AddWithReason("tick", "a", "b")
	q.AddWithReason("edit of x.yaml", "b")
	q.AddAfter("c", time.Second)
	clk.Advance(time.Second)
	keys, reason, ok := q.GetWithReason(t.Context())
	if !ok || !slices.Equal(keys, []string{"a", "b", "c"}) || reason != "tick; edit of x.yaml; requeue" {
		t.Fatalf("got %v %q", keys, reason)
	}
	if got := JoinReasons([]string{"a", "b", "a", "c", "d", "e"}); got != "a; b; c (+2 more)" {
		t.Fatalf("JoinReasons: %q", got)
	}
}

func TestScaledClock(t *testing.T) {
	base := NewFakeClock(t0)
	origin := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewScaledClock(base, origin, 60)
	base.Advance(2 * time.Second)
	if got := s.Now(); !got.Equal(origin.Add(2 * time.Minute)) {
		t.Fatalf("Now = %v", got)
	}
	tm := s.NewTimer(3 * time.Minute) // 3 s of base time
	waitDeadlines(t, base, t0.Add(5*time.Second))
	base.Advance(3 * time.Second)
	recv(t, tm.C())
	if got := s.Now(); got.Before(origin.Add(5 * time.Minute)) {
		t.Fatalf("fired at %v, before its deadline", got)
	}
}

func TestFakeClock(t *testing.T) {
	clk := NewFakeClock(t0)
	a := clk.NewTimer(10 * time.Second)
	b := clk.NewTimer(20 * time.Second)
	now := clk.NewTimer(0)
	if got := <-now.C(); !got.Equal(t0) {
		t.Fatalf("a zero timer fired at %v", got)
	}
	if d := clk.Deadlines(); len(d) != 2 || !d[0].Equal(t0.Add(10*time.Second)) {
		t.Fatalf("deadlines %v", d)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	clk.Advance(time.Nanosecond)
	select {
	case got := <-a.C():
		if !got.Equal(t0.Add(10 * time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("did not fire at its deadline")
	}
	if !b.Stop() || b.Stop() || a.Stop() {
		t.Fatal("Stop")
	}
	clk.Set(t0) // never backwards
	if !clk.Now().Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("went back to %v", clk.Now())
	}
	if d := clk.Deadlines(); len(d) != 0 {
		t.Fatalf("deadlines %v", d)
	}
}
