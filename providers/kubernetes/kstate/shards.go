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

// Owns reports whether the replica holds shard i now.
func (h *Holder) Owns(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.owned[i]
	return ok
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
func (h *Holder) step(ctx context.Context) {
	b := h.b
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
	for i := range all.Items {
		lease := &all.Items[i]
		name := lease.Name
		switch {
		case strings.HasPrefix(name, b.prefix+"-member-"):
			if held(lease, now) {
				members++
			}
		case strings.HasPrefix(name, b.prefix+"-shard-"):
			idx, err := strconv.Atoi(strings.TrimPrefix(name, b.prefix+"-shard-"))
			if err != nil || idx >= n {
				continue
			}
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
	}
	// Shards never created are free too.
	exists := map[int]bool{}
	for i := range all.Items {
		if idx, err := strconv.Atoi(strings.TrimPrefix(all.Items[i].Name, b.prefix+"-shard-")); err == nil && strings.HasPrefix(all.Items[i].Name, b.prefix+"-shard-") {
			exists[idx] = true
		}
	}
	for i := range n {
		if !exists[i] {
			free = append(free, i)
		}
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
			_ = l.release(name, h.me.id)
			h.mu.Lock()
			delete(h.owned, i)
			h.mu.Unlock()
			continue
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
		if len(h.Owned()) >= share {
			break
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
	l := h.b.leases()
	for _, i := range h.Owned() {
		_ = l.release(h.b.ShardLease(i), h.me.id)
	}
	_ = l.release(h.memberLease(), h.me.id)
	h.mu.Lock()
	h.owned = map[int]time.Time{}
	h.running = false
	h.mu.Unlock()
}
