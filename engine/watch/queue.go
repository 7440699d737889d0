package watch

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Queue is a de-duplicating work queue of keys (spec IDs
// "Kind/namespace/name") with delayed adds, shaped like client-go's
// rate-limiting work queue but handing out batches:
//
//   - a key is never handed out twice at once: a key added while it is being
//     processed is handed out again after Done;
//   - each key has at most one due time, the earliest asked for: Add makes it
//     due now (dropping a later delayed add), AddAfter keeps the earlier of
//     the two and does nothing for a key already due;
//   - Get hands out every due key at once, so one plan covers them all;
//   - AddRateLimited backs a key off exponentially until Forget.
//
// Each add may carry a reason; Get's batch says why it runs.
type Queue struct {
	clk Clock

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change Get may wait for
	dirty      map[string][]string
	processing map[string]bool
	waiting    map[string]*item
	byDue      dueHeap
	failures   map[string]int
	baseDelay  time.Duration
	maxDelay   time.Duration
	shutdown   bool
}

// Default backoff of AddRateLimited.
const (
	DefaultBaseDelay = 100 * time.Millisecond
	DefaultMaxDelay  = 5 * time.Minute
)

// maxReasons bounds the reasons kept per key.
const maxReasons = 8

// NewQueue returns an empty queue on clk (nil: the wall clock).
func NewQueue(clk Clock) *Queue {
	if clk == nil {
		clk = RealClock{}
	}
	return &Queue{
		clk:        clk,
		changed:    make(chan struct{}),
		dirty:      map[string][]string{},
		processing: map[string]bool{},
		waiting:    map[string]*item{},
		failures:   map[string]int{},
		baseDelay:  DefaultBaseDelay,
		maxDelay:   DefaultMaxDelay,
	}
}

// Clock returns the clock the queue runs on.
func (q *Queue) Clock() Clock { return q.clk }

// SetBackoff sets AddRateLimited's backoff: base after the first failure,
// doubling per failure, capped at max.
func (q *Queue) SetBackoff(base, max time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.baseDelay, q.maxDelay = base, max
}

// Add makes keys due now.
func (q *Queue) Add(keys ...string) { q.AddWithReason("", keys...) }

// AddWithReason makes keys due now, for reason.
func (q *Queue) AddWithReason(reason string, keys ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown || len(keys) == 0 {
		return
	}
	for _, k := range keys {
		q.addNow(k, reason)
	}
	q.notify()
}

// AddAfter makes key due after d, unless it is due earlier already.
func (q *Queue) AddAfter(key string, d time.Duration) {
	q.AddAfterWithReason(key, d, "requeue")
}

// AddAfterWithReason is AddAfter with the reason the batch will show.
func (q *Queue) AddAfterWithReason(key string, d time.Duration, reason string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addAfter(key, d, reason)
}

// AddRateLimited makes key due after its backoff, which doubles with every
// call until Forget.
func (q *Queue) AddRateLimited(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.addAfter(key, q.backoff(n), "retry")
}

// backoff is the delay after n earlier failures.
func (q *Queue) backoff(n int) time.Duration {
	d := q.baseDelay
	for range n {
		if d >= q.maxDelay/2 {
			return q.maxDelay
		}
		d *= 2
	}
	return min(d, q.maxDelay)
}

// Forget resets key's backoff.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.failures, key)
}

// NumRequeues returns how many times key was rate-limited since Forget.
func (q *Queue) NumRequeues(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.failures[key]
}

// Get blocks until at least one key is due and not being processed, then
// hands out every such key, sorted, with the reasons they were added for
// (joined compactly). It returns false once ctx ends or the queue shuts
// down.
func (q *Queue) Get(ctx context.Context) ([]string, bool) {
	keys, _, ok := q.GetWithReason(ctx)
	return keys, ok
}

// GetWithReason is Get with the batch's reason.
func (q *Queue) GetWithReason(ctx context.Context) ([]string, string, bool) {
	for {
		if ctx.Err() != nil {
			return nil, "", false
		}
		q.mu.Lock()
		if q.shutdown {
			q.mu.Unlock()
			return nil, "", false
		}
		keys, reason, next := q.take()
		changed := q.changed
		q.mu.Unlock()
		if len(keys) > 0 {
			return keys, reason, true
		}
		var timer Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = q.clk.NewTimer(next.Sub(q.clk.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// take hands out the due keys not being processed, or returns the next due
// time (zero if nothing is waiting). q.mu is held.
func (q *Queue) take() (keys []string, reason string, next time.Time) {
	now := q.clk.Now()
	for len(q.byDue) > 0 && !q.byDue[0].due.After(now) {
		it := heap.Pop(&q.byDue).(*item)
		delete(q.waiting, it.key)
		q.dirty[it.key] = it.reasons
	}
	for k := range q.dirty {
		if !q.processing[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		if len(q.byDue) > 0 {
			next = q.byDue[0].due
		}
		return nil, "", next
	}
	slices.Sort(keys)
	var reasons []string
	for _, k := range keys {
		for _, r := range q.dirty[k] {
			if !slices.Contains(reasons, r) {
				reasons = append(reasons, r)
			}
		}
		delete(q.dirty, k)
		q.processing[k] = true
	}
	return keys, JoinReasons(reasons), time.Time{}
}

// tryGet hands out the due keys without waiting (tests).
func (q *Queue) tryGet() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	keys, _, _ := q.take()
	return keys
}

// Done marks keys processed; those added meanwhile are handed out again.
func (q *Queue) Done(keys ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		delete(q.processing, k)
	}
	q.notify()
}

// Len returns how many keys wait to be handed out, due now or later (keys
// being processed and not added again are not counted).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.dirty) + len(q.waiting)
}

// ShutDown makes Get return false from now on and ignores later adds.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.notify()
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutdown
}

// addNow makes k due now. q.mu is held.
func (q *Queue) addNow(k, reason string) {
	if it, ok := q.waiting[k]; ok {
		heap.Remove(&q.byDue, it.index)
		delete(q.waiting, k)
	}
	q.dirty[k] = addReason(q.dirty[k], reason)
}

// addAfter makes k due after d unless it is due earlier. q.mu is held.
func (q *Queue) addAfter(k string, d time.Duration, reason string) {
	if q.shutdown {
		return
	}
	if d <= 0 {
		q.addNow(k, reason)
		q.notify()
		return
	}
	if _, due := q.dirty[k]; due {
		return
	}
	at := q.clk.Now().Add(d)
	if it, ok := q.waiting[k]; ok {
		switch {
		case at.Before(it.due):
			it.due, it.reasons = at, addReason(nil, reason)
			heap.Fix(&q.byDue, it.index)
		case at.Equal(it.due):
			it.reasons = addReason(it.reasons, reason)
			return
		default:
			return
		}
	} else {
		it := &item{key: k, due: at, reasons: addReason(nil, reason)}
		q.waiting[k] = it
		heap.Push(&q.byDue, it)
	}
	q.notify()
}

// notify wakes every Get waiting. q.mu is held.
func (q *Queue) notify() {
	close(q.changed)
	q.changed = make(chan struct{})
}

func addReason(rs []string, r string) []string {
	if rs == nil {
		rs = []string{} // present in dirty even without a reason
	}
	if r == "" || len(rs) >= maxReasons || slices.Contains(rs, r) {
		return rs
	}
	return append(rs, r)
}

// JoinReasons joins distinct reasons compactly: the first three, then how
// many more.
func JoinReasons(rs []string) string {
	var out []string
	for _, r := range rs {
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if len(out) > 3 {
		return fmt.Sprintf("%s (+%d more)", strings.Join(out[:3], "; "), len(out)-3)
	}
	return strings.Join(out, "; ")
}

type item struct {
	key     string
	due     time.Time
	reasons []string
	index   int
}

// dueHeap orders waiting keys by due time, then key.
type dueHeap []*item

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].key < h[j].key
}
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
