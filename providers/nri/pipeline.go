package nri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
)

// Update is one container's change as the runtime applies it: empty CPUs
// leaves its CPU set alone, Limit 0 its memory limit (-1 lifts it).
type Update struct {
	ID    string `json:"id"`
	CPUs  string `json:"cpus,omitempty"`
	Mems  string `json:"mems,omitempty"`
	Limit int64  `json:"limit,omitempty"`
	// owned is what setpoint owns of the container once it is applied.
	owned Owned
}

// CtrInfo is a container as the runtime reports it: its pod, itself,
// and the resources it has now.
type CtrInfo struct {
	Pod  Pod
	Ctr  Ctr
	Have Owned
}

// Snapshot is what Read reports.
type Snapshot struct {
	Topology   nodepolicy.Topology
	Policy     *PolicyState
	Result     nodepolicy.Result
	Containers int
	Pending    int
	Memory     map[string]map[string]int64
	Untracked  int
}

// ErrStopped is returned for an event after the pipeline stopped.
var ErrStopped = errors.New("the node agent's pipeline has stopped")

// Pipeline is the node agent's one serialized event loop over its cache:
// the runtime's events (synchronize, create, update, stop, remove) and
// internal ones (a policy or memory change, a rebalance, a batch of
// updates applied) each run whole, one at a time. Every event rebalances
// and computes the updates of every container it affects, not only its
// own; updates not returned in the runtime's reply go to the runtime
// from a sender outside the loop.
type Pipeline struct {
	path string
	log  *slog.Logger

	ev   chan func()
	stop chan struct{}
	wg   sync.WaitGroup

	// Loop-owned.
	c         *Cache
	last      nodepolicy.Result
	untracked int

	// The sender's queue and function (UpdateContainers).
	sendQ chan batch
	send  func([]Update) (failed []string, err error)

	// The writer: the latest snapshot of the cache, saved atomically.
	saveMu   sync.Mutex
	savedVer uint64
	ver      uint64
	writeQ   chan snapshot

	// Notify is told when pools or problems change (the provider's
	// Events). Set before Start.
	Notify func(reason string)
	// Hook, when set, is called after each event with its kind, in the
	// loop: tests synchronise on it.
	Hook func(kind string)
}

// batch is updates for the sender, or (done set) a marker it closes once
// every batch before it is sent.
type batch struct {
	us   []Update
	done chan struct{}
}

type snapshot struct {
	ver uint64
	raw []byte
}

// NewPipeline loads the cache at path ("" keeps none) for a node of
// topology t.
func NewPipeline(t nodepolicy.Topology, path string, log *slog.Logger) (*Pipeline, error) {
	if err := t.Check(); err != nil {
		return nil, err
	}
	c, err := loadCache(path, t)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{path: path, log: log, c: c, ev: make(chan func()), stop: make(chan struct{}),
		sendQ: make(chan batch, 64), writeQ: make(chan snapshot, 1)}
	p.rebalance()
	return p, nil
}

// Start runs the loop, the sender (send applies a batch of updates and
// returns the IDs that failed) and the writer until Stop.
func (p *Pipeline) Start(send func([]Update) ([]string, error)) {
	p.send = send
	p.wg.Add(3)
	go func() {
		defer p.wg.Done()
		for {
			select {
			case f := <-p.ev:
				f()
			case <-p.stop:
				return
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		p.sender()
	}()
	go func() {
		defer p.wg.Done()
		for {
			select {
			case s := <-p.writeQ:
				p.write(s)
			case <-p.stop:
				// The last snapshot goes to disk before the agent exits.
				select {
				case s := <-p.writeQ:
					p.write(s)
				default:
				}
				return
			}
		}
	}()
}

// Stop ends the loop, the sender and the writer, and waits for them.
func (p *Pipeline) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}

// do runs f in the loop and waits for it.
func (p *Pipeline) do(ctx context.Context, kind string, f func()) error {
	done := make(chan struct{})
	g := func() {
		defer close(done)
		f()
		if p.Hook != nil {
			p.Hook(kind)
		}
	}
	select {
	case p.ev <- g:
	case <-p.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}

// Synchronize takes the runtime's whole list of pods and containers (at
// connection: the agent started or restarted) and returns the updates
// that bring every container to its assignment.
func (p *Pipeline) Synchronize(ctx context.Context, ctrs []CtrInfo) ([]Update, error) {
	var out []Update
	err := p.do(ctx, "synchronize", func() {
		c := p.c
		pods := map[string]Pod{}
		live := map[string]Ctr{}
		var fresh []string
		for _, ci := range ctrs {
			if len(live) >= maxContainers || (len(pods) >= maxPods && pods[ci.Pod.ID].ID == "") {
				p.untracked++
				continue
			}
			pods[ci.Pod.ID] = ci.Pod
			ctr := ci.Ctr
			if old, ok := c.Ctrs[ctr.ID]; ok {
				ctr.Seq, ctr.OrigLimit, ctr.WorkingSet = old.Seq, old.OrigLimit, old.WorkingSet
			} else {
				fresh = append(fresh, ctr.ID)
			}
			live[ctr.ID] = ctr
			// What setpoint owns is what the runtime has now: an update
			// a crash cut off between sending and recording is neither
			// lost nor sent twice.
			if o, ok := c.Owned[ctr.ID]; ok {
				if o.CPUs != "" {
					o.CPUs, o.Mems = ci.Have.CPUs, ci.Have.Mems
				}
				if o.Limit != 0 {
					o.Limit = ci.Have.Limit
				}
				c.Owned[ctr.ID] = o
			}
		}
		// Containers the cache has not seen come after those it has, in
		// ID order: the same list gives the same order.
		slices.Sort(fresh)
		for _, id := range fresh {
			ctr := live[id]
			c.Seq++
			ctr.Seq = c.Seq
			live[id] = ctr
		}
		for id := range c.Owned {
			if _, ok := live[id]; !ok {
				delete(c.Owned, id)
			}
		}
		c.Pods, c.Ctrs = pods, live
		p.rebalance()
		out = p.updates("")
		p.applied(out)
		p.persist()
	})
	return out, err
}

// Create adds a container and returns its adjustment and the updates of
// the other containers its arrival moves.
func (p *Pipeline) Create(ctx context.Context, ci CtrInfo) (adj Update, others []Update, err error) {
	err = p.do(ctx, "create", func() {
		c := p.c
		if _, known := c.Ctrs[ci.Ctr.ID]; !known {
			if len(c.Ctrs) >= maxContainers || (len(c.Pods) >= maxPods && c.Pods[ci.Pod.ID].ID == "") {
				p.untracked++
				p.log.Warn("the node cache is full: a container is not placed", "container", ci.Ctr.ID, "containers", len(c.Ctrs))
				return
			}
			c.Seq++
			ci.Ctr.Seq = c.Seq
			ci.Ctr.OrigLimit = ci.Have.Limit
		} else {
			old := c.Ctrs[ci.Ctr.ID]
			ci.Ctr.Seq, ci.Ctr.OrigLimit, ci.Ctr.WorkingSet = old.Seq, old.OrigLimit, old.WorkingSet
		}
		c.Pods[ci.Pod.ID] = ci.Pod
		c.Ctrs[ci.Ctr.ID] = ci.Ctr
		p.rebalance()
		if u, ok := p.diff(ci.Ctr.ID); ok {
			adj = u
			p.applied([]Update{u})
		}
		others = p.updates(ci.Ctr.ID)
		p.applied(others)
		p.persist()
	})
	return adj, others, err
}

// UpdateContainer records a container's new CPU request and the resources
// the runtime is about to give it, and returns the updates that keep it
// and the others it moves on their assignments.
func (p *Pipeline) UpdateContainer(ctx context.Context, ci CtrInfo) ([]Update, error) {
	var out []Update
	err := p.do(ctx, "update", func() {
		c := p.c
		old, ok := c.Ctrs[ci.Ctr.ID]
		if !ok {
			return
		}
		old.CPUMilli = ci.Ctr.CPUMilli
		c.Ctrs[ci.Ctr.ID] = old
		if o, ok := c.Owned[ci.Ctr.ID]; ok {
			// The runtime's update replaces what setpoint set where it
			// sets something: the diff puts it back.
			if ci.Have.CPUs != "" && o.CPUs != "" {
				o.CPUs = ci.Have.CPUs
			}
			if ci.Have.Mems != "" && o.Mems != "" {
				o.Mems = ci.Have.Mems
			}
			if ci.Have.Limit != 0 && o.Limit != 0 {
				o.Limit = ci.Have.Limit
			}
			c.Owned[ci.Ctr.ID] = o
		}
		p.rebalance()
		out = p.updates("")
		p.applied(out)
		p.persist()
	})
	return out, err
}

// StopContainer forgets a container and returns the updates of the
// others its leaving moves.
func (p *Pipeline) StopContainer(ctx context.Context, id string) ([]Update, error) {
	var out []Update
	err := p.do(ctx, "stop", func() {
		if _, ok := p.c.Ctrs[id]; !ok {
			return
		}
		delete(p.c.Ctrs, id)
		delete(p.c.Owned, id)
		p.rebalance()
		out = p.updates("")
		p.applied(out)
		p.persist()
	})
	return out, err
}

// RemovePod forgets a pod and its containers; the others' updates go to
// the sender (the runtime's reply carries none).
func (p *Pipeline) RemovePod(ctx context.Context, podID string) error {
	return p.do(ctx, "remove", func() {
		if _, ok := p.c.Pods[podID]; !ok {
			return
		}
		delete(p.c.Pods, podID)
		for id, ctr := range p.c.Ctrs {
			if ctr.Pod == podID {
				delete(p.c.Ctrs, id)
				delete(p.c.Owned, id)
			}
		}
		p.rebalance()
		p.queue(p.updates(""))
		p.persist()
	})
}

// SetPolicy runs a NodePolicy (nil: none), saves the cache, and sends
// every update the change makes. Another policy than the one running is
// refused: a node runs one.
func (p *Pipeline) SetPolicy(ctx context.Context, ps *PolicyState) error {
	var err error
	if e := p.do(ctx, "policy", func() {
		cur := p.c.Policy
		if ps != nil && cur != nil && cur.Address != ps.Address {
			err = fmt.Errorf("this node already runs %s: a node runs one NodePolicy (make their node selectors disjoint)", cur.Address)
			return
		}
		if ps != nil {
			if err = ps.Config.Check(); err != nil {
				return
			}
		}
		err = p.commit(func() { p.c.Policy = ps }, func() { p.c.Policy = cur })
	}); e != nil {
		return e
	}
	return err
}

// commit makes a change the engine asked for: on disk first, then to the
// containers. A change that cannot be saved is undone and sends nothing,
// so what the engine records as applied is what the node runs.
func (p *Pipeline) commit(do, undo func()) error {
	do()
	p.rebalance()
	if err := p.persistNow(); err != nil {
		undo()
		p.rebalance()
		return err
	}
	p.queue(p.updates(""))
	return nil
}

// ReleasePolicy stops running the policy at address (if it is the one
// running): setpoint's CPU sets and limits go back to the runtime's.
func (p *Pipeline) ReleasePolicy(ctx context.Context, address string) error {
	var err error
	if e := p.do(ctx, "policy", func() {
		cur := p.c.Policy
		if cur == nil || cur.Address != address {
			return
		}
		err = p.commit(func() { p.c.Policy = nil }, func() { p.c.Policy = cur })
	}); e != nil {
		return e
	}
	return err
}

// SetMemory sets a workload's node-applied memory limits by container
// (nil: none), saves the cache and sends the updates.
func (p *Pipeline) SetMemory(ctx context.Context, workload string, limits map[string]int64) error {
	var err error
	if e := p.do(ctx, "memory", func() {
		old, had := p.c.Memory[workload]
		if !had && limits != nil && len(p.c.Memory) >= maxMemoryObjs {
			err = fmt.Errorf("this node holds memory limits of %d workloads already", maxMemoryObjs)
			return
		}
		err = p.commit(func() {
			if limits == nil {
				delete(p.c.Memory, workload)
			} else {
				p.c.Memory[workload] = maps.Clone(limits)
			}
		}, func() {
			if had {
				p.c.Memory[workload] = old
			} else {
				delete(p.c.Memory, workload)
			}
		})
	}); e != nil {
		return e
	}
	return err
}

// SetWorkingSets records containers' memory working sets (bytes), the
// floor of their limits.
func (p *Pipeline) SetWorkingSets(ctx context.Context, ws map[string]int64) error {
	return p.do(ctx, "metrics", func() {
		moved := false
		for id, v := range ws {
			if ctr, ok := p.c.Ctrs[id]; ok && workingSetMoved(ctr.WorkingSet, v) {
				ctr.WorkingSet = v
				p.c.Ctrs[id] = ctr
				moved = true
			}
		}
		if !moved {
			return
		}
		p.rebalance()
		p.queue(p.updates(""))
		p.persist()
	})
}

// workingSetMoved: a working set is recorded again when it moved by more
// than 1 MiB and 5%, so a sample every few seconds does not rewrite the
// cache for noise.
func workingSetMoved(old, v int64) bool {
	d := v - old
	if d < 0 {
		d = -d
	}
	return d > 1<<20 && d*20 > old
}

// CgroupPaths are the known containers' cgroups paths, by container.
func (p *Pipeline) CgroupPaths(ctx context.Context) (map[string]string, error) {
	var out map[string]string
	err := p.do(ctx, "read", func() {
		out = make(map[string]string, len(p.c.Ctrs))
		for id, c := range p.c.Ctrs {
			if c.Cgroup != "" {
				out[id] = c.Cgroup
			}
		}
	})
	return out, err
}

// Rebalance re-sends whatever is not applied yet (after a failed batch).
func (p *Pipeline) Rebalance(ctx context.Context) error {
	return p.do(ctx, "rebalance", func() {
		p.rebalance()
		p.queue(p.updates(""))
	})
}

// Snapshot reports the node's pools and assignments.
func (p *Pipeline) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := p.do(ctx, "read", func() {
		s = Snapshot{Topology: p.c.Topology, Result: p.last.Clone(), Containers: len(p.c.Ctrs), Untracked: p.untracked}
		if p.c.Policy != nil {
			ps := *p.c.Policy
			s.Policy = &ps
		}
		s.Memory = map[string]map[string]int64{}
		for k, v := range p.c.Memory {
			s.Memory[k] = maps.Clone(v)
		}
		for id := range p.c.Ctrs {
			if _, ok := p.diff(id); ok {
				s.Pending++
			}
		}
	})
	return s, err
}

// rebalance recomputes every assignment from the cache.
func (p *Pipeline) rebalance() {
	c := p.c
	in := nodepolicy.Input{Topology: c.Topology, Prev: c.Pools, Memory: map[string]int64{}}
	if c.Policy != nil {
		in.Policy = c.Policy.Config.Policy
	} else {
		in.Policy = nodepolicy.Policy{CPUs: nodepolicy.Observe, Memory: nodepolicy.Observe}
	}
	in.Containers = make([]nodepolicy.Container, 0, len(c.Ctrs))
	for _, ctr := range c.Ctrs {
		in.Containers = append(in.Containers, ctr.Container)
	}
	for w, lims := range c.Memory {
		ns, name, _ := strings.Cut(w, "/")
		for ctr, v := range lims {
			in.Memory[nodepolicy.MemoryKey(ns, name, ctr)] = v
		}
	}
	before := p.last
	p.last = nodepolicy.Rebalance(in)
	c.Pools = p.last.PoolCPUs()
	if p.Notify != nil && !samePools(before, p.last) {
		p.Notify("the node's pools or problems changed")
	}
}

func samePools(a, b nodepolicy.Result) bool {
	if len(a.Pools) != len(b.Pools) || !slices.Equal(a.Problems, b.Problems) {
		return false
	}
	for i := range a.Pools {
		if a.Pools[i].Name != b.Pools[i].Name || !a.Pools[i].CPUs.Equal(b.Pools[i].CPUs) {
			return false
		}
	}
	return true
}

// target is what setpoint should own of a container: its assignment in
// the enforced dimensions.
func (p *Pipeline) target(id string) Owned {
	pol := p.c.Policy
	a, ok := p.last.Assign[id]
	if pol == nil || !ok {
		return Owned{}
	}
	var t Owned
	if pol.Config.Policy.CPUs == nodepolicy.Enforce && len(a.CPUs) > 0 {
		t.CPUs = a.CPUs.String()
		t.Mems = p.allMems()
		if a.Mems != nil {
			t.Mems = memsString(a.Mems)
		}
	}
	if pol.Config.Policy.Memory == nodepolicy.Enforce && a.MemoryLimit > 0 {
		t.Limit = a.MemoryLimit
	}
	return t
}

func (p *Pipeline) allMems() string {
	all := make([]int, p.c.Topology.Sockets)
	for i := range all {
		all[i] = i
	}
	return memsString(all)
}

func memsString(m []int) string { return nodepolicy.CPUSet(m).String() }

// diff is the update that takes a container from what setpoint owns of it
// to its target; what setpoint lets go of goes back to the runtime's
// (every CPU, the limit it was created with).
func (p *Pipeline) diff(id string) (Update, bool) {
	cur, tgt := p.c.Owned[id], p.target(id)
	u := Update{ID: id, owned: tgt}
	changed := false
	switch {
	case tgt.CPUs != "" && (tgt.CPUs != cur.CPUs || tgt.Mems != cur.Mems):
		u.CPUs, u.Mems, changed = tgt.CPUs, tgt.Mems, true
	case tgt.CPUs == "" && cur.CPUs != "":
		all := make(nodepolicy.CPUSet, p.c.Topology.CPUs())
		for i := range all {
			all[i] = i
		}
		u.CPUs, u.Mems, changed = all.String(), p.allMems(), true
	}
	switch {
	case tgt.Limit != 0 && tgt.Limit != cur.Limit:
		u.Limit, changed = tgt.Limit, true
	case tgt.Limit == 0 && cur.Limit != 0:
		u.Limit, changed = -1, true
		if orig := p.c.Ctrs[id].OrigLimit; orig > 0 {
			u.Limit = orig
		}
	}
	return u, changed
}

// updates are the diffs of every container but except, by ID.
func (p *Pipeline) updates(except string) []Update {
	var out []Update
	for _, id := range slices.Sorted(maps.Keys(p.c.Ctrs)) {
		if id == except {
			continue
		}
		if u, ok := p.diff(id); ok {
			out = append(out, u)
		}
	}
	return out
}

// applied records updates the runtime took.
func (p *Pipeline) applied(us []Update) {
	for _, u := range us {
		if _, ok := p.c.Ctrs[u.ID]; !ok {
			continue
		}
		if u.owned == (Owned{}) {
			delete(p.c.Owned, u.ID)
		} else {
			p.c.Owned[u.ID] = u.owned
		}
	}
}

// queue hands updates to the sender; they count as applied when it says
// the runtime took them.
func (p *Pipeline) queue(us []Update) {
	if len(us) == 0 {
		return
	}
	select {
	case p.sendQ <- batch{us: us}:
	default:
		// The sender is far behind: the next event's diff sends again.
		p.log.Warn("container updates are backed up: they go with the next event", "updates", len(us))
	}
}

func (p *Pipeline) sender() {
	for {
		select {
		case b := <-p.sendQ:
			if b.done != nil {
				close(b.done)
				continue
			}
			us := b.us
			failed, err := p.send(us)
			if err != nil {
				p.log.Warn("updating containers", "updates", len(us), "err", err)
				continue
			}
			ok := us[:0:0]
			for _, u := range us {
				if !slices.Contains(failed, u.ID) {
					ok = append(ok, u)
				}
			}
			if len(failed) > 0 {
				p.log.Warn("the runtime refused container updates", "failed", failed)
			}
			_ = p.do(context.Background(), "applied", func() {
				p.applied(ok)
				p.persist()
			})
		case <-p.stop:
			return
		}
	}
}

// Flush waits until every update queued so far went to the runtime (or
// failed), or ctx ends.
func (p *Pipeline) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case p.sendQ <- batch{done: done}:
	case <-p.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-p.stop:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// persist hands the cache to the writer.
func (p *Pipeline) persist() {
	if p.path == "" {
		return
	}
	raw, err := p.c.encode()
	if err != nil {
		p.log.Error("encoding the node cache", "err", err)
		return
	}
	p.ver++
	s := snapshot{ver: p.ver, raw: raw}
	select {
	case <-p.writeQ: // an older snapshot nobody wrote yet
	default:
	}
	p.writeQ <- s
}

// persistNow saves the cache before the event returns: a policy or memory
// limit Apply reports applied only once it is on disk.
func (p *Pipeline) persistNow() error {
	if p.path == "" {
		return nil
	}
	raw, err := p.c.encode()
	if err != nil {
		return err
	}
	p.ver++
	return p.write(snapshot{ver: p.ver, raw: raw})
}

// write saves a snapshot unless a newer one is on disk already.
func (p *Pipeline) write(s snapshot) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	if s.ver <= p.savedVer {
		return nil
	}
	if err := saveCache(p.path, s.raw); err != nil {
		p.log.Error("saving the node cache", "err", err)
		return err
	}
	p.savedVer = s.ver
	return nil
}

// DryRun is what the node would make of a policy, without running it:
// its problems on this node's topology and containers.
func (p *Pipeline) DryRun(ctx context.Context, ps *PolicyState) ([]nodepolicy.Problem, error) {
	var out []nodepolicy.Problem
	err := p.do(ctx, "dry-run", func() {
		saved, last, pools := p.c.Policy, p.last, p.c.Pools
		notify := p.Notify
		p.Notify = nil
		p.c.Policy = ps
		p.rebalance()
		out = p.last.Problems
		p.c.Policy, p.last, p.c.Pools, p.Notify = saved, last, pools, notify
	})
	return out, err
}
