package kstate

import (
	"context"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShardOf is the shard of a group of specs (engine.Groups' name) among n.
func ShardOf(group string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int(h.Sum32() % uint32(n))
}

// Holder keeps one in-cluster replica's share of the shard Leases, as
// Argo CD's controller shards clusters, but without anyone assigning them:
// each replica renews a member Lease so the others can count the replicas,
// takes free or expired shards up to its share ceil(shards / members),
// gives back any beyond it (so a new replica gets some), and renews the
// rest. A replica that dies stops renewing: after LeaseDuration its shards
// are free and the others take them at their next look (every
// RetryPeriod), so a failover takes at most LeaseDuration + RetryPeriod.
type Holder struct {
	b  *Backend
	me holder
	// RetryPeriod is how often it looks at the Leases.
	RetryPeriod time.Duration
	// OnChange is called (from Run's goroutine) with the shards held after
	// each change: reconcile the specs of the new ones.
	OnChange func(owned []int)
	Log      *slog.Logger

	mu      sync.Mutex
	owned   map[int]time.Time // shard → last renewal
	running bool
	down    bool // said that the API server does not answer
	// otherCount: said that replicas of another shard count hold Leases.
	otherCount bool
	busy       sync.RWMutex
	// crash makes Run end without releasing anything, as a killed
	// process does (tests).
	crash bool
}

// NewHolder makes the backend's Lock a no-op (the shard Leases are the
// lock) and returns the holder that keeps them; Run it.
func (b *Backend) NewHolder(who string) *Holder {
	h := &Holder{b: b, me: newHolder(who, b.Now()), RetryPeriod: time.Second, owned: map[int]time.Time{}, Log: slog.Default()}
	b.mu.Lock()
	b.holder = h
	b.mu.Unlock()
	return h
}

// ID is the holder's identity in the Leases.
func (h *Holder) ID() string { return h.me.id }

// Owns reports whether the replica holds shard i now: it took or renewed
// its Lease less than two thirds of the lease duration ago (a look at the
// Leases that hangs must not leave it claiming a Lease that expired and
// went to another replica).
func (h *Holder) Owns(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.owned[i]
	return ok && h.b.Now().Sub(at) < h.b.LeaseDuration*2/3
}

// Busy marks a reconcile of this replica's specs in progress: shards are
// given back (to a new replica, or at shutdown) only between reconciles,
// so two replicas never act on one shard at once. Call the returned func
// when the reconcile is done.
func (h *Holder) Busy() func() {
	h.busy.RLock()
	return h.busy.RUnlock
}

// Owned lists the shards held, in order.
func (h *Holder) Owned() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]int, 0, len(h.owned))
	for i := range h.owned {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// Down reports whether the API server did not answer the last look: the
// replica holds (reconciles nothing) until it does.
func (h *Holder) Down() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// Healthy reports whether the last look at the Leases succeeded recently.
func (h *Holder) Healthy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running
}

func (h *Holder) memberLease() string {
	// One per replica; the id is unique per process start.
	sum := fnvHex(h.me.id)
	return h.b.prefix + "-member-" + sum
}

func fnvHex(s string) string {
	f := fnv.New64a()
	f.Write([]byte(s))
	return strconv.FormatUint(f.Sum64(), 16)
}

// Run keeps the replica's shards until ctx ends, then releases them (and
// its member Lease) so the others take them at once.
func (h *Holder) Run(ctx context.Context) error {
	defer func() {
		if !h.crash {
			h.releaseAll()
		}
	}()
	t := time.NewTicker(h.RetryPeriod)
	defer t.Stop()
	for {
		h.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// step looks at the Leases once: renews, gives back, takes.
func (h *Holder) step(parent context.Context) {
	b := h.b
	// A look that hangs must end before the Leases would lapse.
	ctx, cancel := context.WithTimeout(parent, b.LeaseDuration/2)
	defer cancel()
	l := b.leases()
	before := h.Owned()
	ok := true
	if err := l.acquire(ctx, h.memberLease(), h.me); err != nil {
		h.trouble("renewing the member lease", err)
		ok = false
	}
	all, err := b.core.CoordinationV1().Leases(b.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelEnvironment + "=" + envLabel(b.env)})
	if err != nil {
		h.trouble("reading the shard leases", err)
		h.mu.Lock()
		h.running = false
		// Unrenewed shards are let go before their Leases expire: another
		// replica may take them once they do.
		for i, at := range h.owned {
			if b.Now().Sub(at) > b.LeaseDuration*2/3 {
				delete(h.owned, i)
			}
		}
		h.mu.Unlock()
		h.changed(before)
		return
	}
	now := b.Now()
	members := 0
	free := []int{}
	n := b.shardCount()
	exists := map[int]bool{}
	otherCount := false
	for i := range all.Items {
		lease := &all.Items[i]
		name := lease.Name
		if strings.HasPrefix(name, b.prefix+"-member-") {
			if held(lease, now) {
				members++
			}
			continue
		}
		count, idx, isShard := b.shardIndex(name)
		switch {
		case !isShard:
			continue
		case count != n:
			// Replicas of another --shards (a rollout in progress): their
			// shards name other groups. Take nothing while any is held.
			otherCount = otherCount || held(lease, now)
			continue
		case idx >= n:
			continue
		}
		exists[idx] = true
		mine := holderID(lease) == h.me.id
		h.mu.Lock()
		_, owned := h.owned[idx]
		if owned && (!mine || !held(lease, now)) {
			// Taken over, or it expired unrenewed: not ours any more.
			delete(h.owned, idx)
			owned = false
		}
		h.mu.Unlock()
		if !held(lease, now) && !owned {
			free = append(free, idx)
		}
	}
	// Shards never created are free too.
	for i := range n {
		if !exists[i] {
			free = append(free, i)
		}
	}
	h.mu.Lock()
	said := h.otherCount
	h.otherCount = otherCount
	h.mu.Unlock()
	if otherCount {
		if !said {
			h.Log.Warn("replicas with another shard count (--shards) hold Leases: taking no shard until they are gone")
		}
		free = nil
	}
	slices.Sort(free)
	members = max(members, 1)
	share := (n + members - 1) / members

	// Renew what is held; give back what exceeds the share (highest
	// first, so the split is stable).
	owned := h.Owned()
	for j := len(owned) - 1; j >= 0; j-- {
		i := owned[j]
		name := b.ShardLease(i)
		if j >= share {
			// Only between reconciles; else at a later look.
			if h.busy.TryLock() {
				h.mu.Lock()
				delete(h.owned, i)
				h.mu.Unlock()
				_ = l.release(name, h.me.id)
				h.busy.Unlock()
				continue
			}
		}
		h.mu.Lock()
		last := h.owned[i]
		h.mu.Unlock()
		if now.Sub(last) < b.LeaseDuration/3 {
			continue
		}
		if err := l.renew(name, h.me.id); err != nil {
			h.Log.Warn("renewing a shard", "shard", i, "err", err)
			h.mu.Lock()
			delete(h.owned, i)
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		h.owned[i] = now
		h.mu.Unlock()
	}
	for _, i := range free {
		if !ok || len(h.Owned()) >= share {
			break // a replica that cannot renew its member Lease takes nothing
		}
		if err := l.acquire(ctx, b.ShardLease(i), h.me); err != nil {
			continue // another replica was quicker
		}
		h.mu.Lock()
		h.owned[i] = now
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.running = ok
	wasDown := h.down
	h.down = h.down && !ok
	h.mu.Unlock()
	if wasDown && ok {
		h.Log.Info("the API server answers again: taking shards back")
	}
	h.changed(before)
}

// trouble says once that the Leases cannot be read or renewed (the API
// server is away), and then quietly keeps trying: the loop holds, it does
// not repeat itself every second.
func (h *Holder) trouble(what string, err error) {
	h.mu.Lock()
	first := !h.down
	h.down = true
	h.mu.Unlock()
	if first {
		h.Log.Warn("the API server does not answer: no reconcile until it does; the shards not renewed are given up as their Leases expire", "while", what, "err", err)
		return
	}
	h.Log.Debug("still no answer", "while", what, "err", err)
}

func (h *Holder) changed(before []int) {
	after := h.Owned()
	if slices.Equal(before, after) {
		return
	}
	h.Log.Info("shards", "holder", h.me.id, "owned", after)
	if h.OnChange != nil {
		h.OnChange(after)
	}
}

func (h *Holder) releaseAll() {
	h.busy.Lock() // after the reconcile in flight
	defer h.busy.Unlock()
	owned := h.Owned()
	h.mu.Lock()
	h.owned = map[int]time.Time{}
	h.running = false
	h.mu.Unlock()
	l := h.b.leases()
	for _, i := range owned {
		_ = l.release(h.b.ShardLease(i), h.me.id)
	}
	// The member Lease goes: one per process start would pile up.
	ctx, cancel := context.WithTimeout(context.Background(), h.b.LeaseDuration)
	defer cancel()
	_ = h.b.core.CoordinationV1().Leases(h.b.namespace).Delete(ctx, h.memberLease(), metav1.DeleteOptions{})
}
