package signals

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

func TestBudgetCharge(t *testing.T) {
	b := NewBudget(10)
	for i, c := range []struct {
		cost  int64
		ok    bool
		spent int64
	}{
		{4, true, 4}, {6, true, 10}, {1, false, 10}, {0, true, 10},
	} {
		err := b.Charge("q", c.cost)
		if (err == nil) != c.ok || b.Spent() != c.spent {
			t.Fatalf("charge %d of %d: %v, spent %d, want ok %v spent %d", i, c.cost, err, b.Spent(), c.ok, c.spent)
		}
		if err != nil && (!errors.Is(err, ErrBudget) || !errors.Is(err, ErrBound) ||
			!strings.Contains(err.Error(), "makes some 1 samples, and this spec's queries already made 10 in this reconcile (11 in all)") ||
			!strings.Contains(err.Error(), "past the query budget of 10 samples per spec and reconcile")) {
			t.Fatalf("the refusal must name the budget and the counts: %v", err)
		}
	}
}

// Cost is what the budgets charge: subquery steps × what each holds, plus
// the expression's own instant.
func TestCost(t *testing.T) {
	for _, c := range []struct {
		q    string
		want int64
	}{
		// 28 days at 1 s: 2,419,201 steps × vector(1) holding 2 (its
		// argument and its answer), and the sum's own 2 at the instant.
		{"sum_over_time(vector(1)[28d:1s])", 2*2_419_201 + 2},
		// No subquery: the instant's own values, the function's argument
		// and its answer (one series each).
		{"rate(x[5m])", 2},
		// One hour at a minute: 61 steps × 1 series, + 2 at the instant.
		{"max_over_time(x[1h:1m])", 61 + 2},
		// A range vector as the answer: every point of 20 minutes at one
		// a second (1,201), + the selector's 1.
		{"x[20m]", 1201 + 1},
		{"(x[1m])", 61 + 1},
	} {
		e, err := testParser.ParseExpr(c.q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Cost(c.q, e, nil)
		if err != nil || got != c.want {
			t.Errorf("%s: %d %v, want %d", c.q, got, err, c.want)
		}
	}
}

// However many queries run at once, what they hold never passes the bound.
func TestInFlightNeverPastItsBound(t *testing.T) {
	f := NewInFlight(10)
	var mu sync.Mutex
	var held, most int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(1 + i%7)
			release, err := f.Acquire(context.Background(), "q", n)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held += n
			most = max(most, held)
			mu.Unlock()
			for range 100 {
				// Let others try while this holds its part.
				runtime.Gosched()
			}
			mu.Lock()
			held -= n
			mu.Unlock()
			release()
		}()
	}
	wg.Wait()
	if most > 10 || f.Used() != 0 {
		t.Fatalf("held at most %d of a bound of 10; %d still held", most, f.Used())
	}
}

func TestInFlightRefusesAndGivesUp(t *testing.T) {
	f := NewInFlight(10)
	if _, err := f.Acquire(context.Background(), "big", 11); !errors.Is(err, ErrBound) {
		t.Fatalf("a query past the whole bound must be refused at once: %v", err)
	}
	release, err := f.Acquire(context.Background(), "a", 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.Acquire(ctx, "b", 5)
		done <- err
	}()
	// b waits behind a; its context ends: it gives up, holding nothing.
	testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiters) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, ErrBudget) {
		t.Fatalf("a wait that ends must say the budget: %v", err)
	}
	release()
	if f.Used() != 0 {
		t.Fatalf("%d held after every release", f.Used())
	}
	// Waiters are served in order: c (9) is not overtaken by d (2), which
	// alone would fit beside a (5).
	r1, _ := f.Acquire(context.Background(), "a", 5)
	order := make(chan string, 2)
	go func() { r, _ := f.Acquire(context.Background(), "c", 9); order <- "c"; r() }()
	testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiters) == 1 })
	go func() { r, _ := f.Acquire(context.Background(), "d", 2); order <- "d"; r() }()
	testutil.Eventually(t, 10*time.Second, "the waiter queued", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiters) == 2 })
	r1()
	if first := <-order; first != "c" {
		t.Fatalf("%s was served before c, which waited first", first)
	}
	<-order
}
