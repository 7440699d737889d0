package signals

import (
	"context"
	"fmt"
	"sync"
)

// The budgets every query is charged against, beside the bounds one query
// is held to (MaxSamples): queries that each pass the bounds could still,
// together, take the process past its memory limit (five 2.4M-sample
// triggers in one Schedule held 586 MB under watch).
const (
	// SpecBudget bounds the samples one spec's own queries (its triggers,
	// activity and overrides) make in one reconcile, in all: past it, the
	// query that would cross it is not evaluated and the spec's decision
	// holds. `validate` refuses a spec whose queries alone are past it at
	// one series each.
	SpecBudget = InFlightBudget
	// InFlightBudget bounds the samples all the queries the process
	// evaluates at once may make (reconciles and debug evaluations
	// together). The Go heap peaks near 100 bytes per sample counted
	// while such a query runs, its garbage included (BenchmarkSpecBudgetPeak:
	// 190 MB for one query of 1.9M, 414 MB for one of 4.8M), so 2M keeps
	// the worst under 256 MB, half a 512Mi container. A single query above
	// it is refused at once (MaxSamples stays the engine's own count,
	// checked as it goes).
	InFlightBudget = 2_000_000
)

// Budget counts what one spec's queries cost in one reconcile.
type Budget struct {
	mu    sync.Mutex
	spent int64
	limit int64
}

// NewBudget returns a budget of limit samples.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Charge takes cost samples for query from the budget, or says why not
// (a BoundError naming the budget and the samples counted); nothing is
// taken when it refuses.
func (b *Budget) Charge(query string, cost int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent+cost > b.limit {
		return &BoundError{
			What:   fmt.Sprintf("the query %q makes some %d samples, and this spec's queries already made %d in this reconcile (%d in all)", cut(query), cost, b.spent, b.spent+cost),
			Bound:  fmt.Sprintf("%d samples per spec and reconcile", b.limit),
			Hint:   "fewer or cheaper queries (a coarser subquery step, a shorter range)",
			Budget: true,
		}
	}
	b.spent += cost
	return nil
}

// Refund gives back a charge for a query that was not evaluated after all.
func (b *Budget) Refund(cost int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent = max(b.spent-cost, 0)
}

// Spent is what the budget has counted.
func (b *Budget) Spent() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

type budgetKey struct{}

// WithBudget charges the queries evaluated under ctx to b.
func WithBudget(ctx context.Context, b *Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// BudgetOf is the budget ctx charges, nil for none.
func BudgetOf(ctx context.Context) *Budget {
	b, _ := ctx.Value(budgetKey{}).(*Budget)
	return b
}

// InFlight bounds the samples of the queries a process evaluates at once.
// A query waits (first come, first served) until what it costs is free,
// as long as its context lets it.
type InFlight struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	waiters []*waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

// NewInFlight returns a bound of limit samples at once.
func NewInFlight(limit int64) *InFlight { return &InFlight{limit: limit} }

// Process is the bound every query source of this process shares.
var Process = NewInFlight(InFlightBudget)

// Acquire takes n samples, waiting while other queries hold them; it
// returns a BoundError at once for n past the whole bound, and the
// context's error if it ends first. Release gives them back.
func (f *InFlight) Acquire(ctx context.Context, query string, n int64) (release func(), err error) {
	if n > f.limit {
		return nil, &BoundError{What: fmt.Sprintf("the query %q makes some %d samples", cut(query), n), Bound: fmt.Sprintf("%d samples evaluated at once in this process", f.limit)}
	}
	f.mu.Lock()
	if len(f.waiters) == 0 && f.used+n <= f.limit {
		f.used += n
		f.mu.Unlock()
		return f.releaser(n), nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	f.waiters = append(f.waiters, w)
	held := f.used
	f.mu.Unlock()
	select {
	case <-w.ready:
		return f.releaser(n), nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-w.ready:
			// Granted as the context ended: give it back.
			f.used -= n
			f.wake()
		default:
			for i, x := range f.waiters {
				if x == w {
					f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
					break
				}
			}
			f.wake()
		}
		return nil, fmt.Errorf("waiting for %d samples while other queries held %d: %w", n, held, &BoundError{
			What:  fmt.Sprintf("the query %q waited for %d samples until its deadline", cut(query), n),
			Bound: fmt.Sprintf("%d samples evaluated at once in this process", f.limit), Budget: true})
	}
}

func (f *InFlight) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.used -= n
			f.wake()
		})
	}
}

// wake grants waiting queries in order while they fit (f.mu held).
func (f *InFlight) wake() {
	for len(f.waiters) > 0 && f.used+f.waiters[0].n <= f.limit {
		w := f.waiters[0]
		f.waiters = f.waiters[1:]
		f.used += w.n
		close(w.ready)
	}
}

// Used is what queries hold now.
func (f *InFlight) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used
}

// cut shortens a query for a message.
func cut(q string) string {
	const most = 120
	r := []rune(q)
	if len(r) > most {
		return string(r[:most]) + "…"
	}
	return q
}
