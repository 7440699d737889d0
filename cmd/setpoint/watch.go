package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

func newWatchCmd() *cobra.Command {
	var debounce time.Duration
	var debugAddr, debugTokenFile string
	var noTickRescan bool
	cmd := &cobra.Command{
		Use:   "watch DIR",
		Short: "Reconcile continuously: on every spec edit, when a hold ends, and every tick, until stopped",
		Long: `watch plans and applies like apply --auto-approve, as a controller does. Specs
are keys on a work queue: all of them at start and every Environment tick, the
specs of a file after each edit of it (debounced), and a spec again exactly when
a change of it held by a stability window or a cooldown becomes due. A broken
edit is reported and the last good version of that file keeps running. Time is
the wall clock; with the sim world, virtual time runs from the sim config's
start (or the last change applied, when later) at the sim speed (at least
real time). watch holds the state's lock for its life; should the lock file be
removed or replaced under it, /healthz fails at once and watch exits non-zero,
to be run again (by hand or its supervisor), which locks the state anew.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			limitMemory()
			// A shard is a Lease and a spec's shard a hash modulo their
			// count: none would divide by zero.
			if shardCount < 1 || shardCount > maxShards {
				return fmt.Errorf("--shards %d: want 1 to %d", shardCount, maxShards)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Cancelled with a stateLockLost as its cause when the lock
			// file goes: everything the watch runs stops with it.
			ctx, lost := context.WithCancelCause(ctx)
			defer lost(nil)
			dbg, err := newDebugConfig(debugAddr, debugTokenFile)
			if err != nil {
				return err
			}
			if dbg == nil && healthAddr != "" {
				// /metrics on the health port without the debug endpoints:
				// recording must start before the providers are wrapped.
				dbg = &debugConfig{metrics: watchMetrics()}
			}
			l, err := newLoader(ctx, defaultCUELimits())
			if err != nil {
				return err
			}
			w := &watch.Watcher{Dir: args[0], Loader: l, Debounce: debounce, Log: slog.Default(), NoTickRescan: noTickRescan}
			for _, d := range w.Load() {
				fmt.Fprintln(cmd.ErrOrStderr(), d.Error())
			}
			set := w.Set()
			var docs []spec.Document
			if set.Env != nil {
				docs = append(docs, set.Env)
			}
			ws, err := workspaceFrom(args[0], docs, nil, simOptions{})
			if err != nil {
				return err
			}
			defer ws.close()
			dbg.selfMetrics().instrument(ws.eng.Providers)
			w.Tick = ws.env.Spec.Tick.D()
			dbg.selfMetrics().observeTick(w.Tick)
			var clk watch.Clock = watch.RealClock{}
			if ws.virtual() {
				cfg, _ := sim.Config(ws.env)
				clk = watch.NewScaledClock(watch.RealClock{}, ws.now, max(cfg.Speed, 1))
			}
			w.Clock = clk
			w.Queue = watch.NewQueue(clk)
			_, stopDebug, err := dbg.serve(ctx, ws.eng.Signals, clk.Now)
			if err != nil {
				return err
			}
			defer stopDebug()
			providersAt := providerConfigs(ws.env)
			stateAt := ws.env.Spec.State
			tickAt := w.Tick
			said := &logged{}
			lockGone := func() error { return nil } // in a cluster the shard Leases are the lock
			if hc, ok := ws.state.(interface{ CheckHeld() error }); ok {
				lockGone = hc.CheckHeld
				go watchStateLock(ctx, lockGone, lost)
			}
			shards := startShards(ctx, ws, w, shardCount, healthAddr, dbg.selfMetrics(), lockGone)
			// The directory is this process's until it stops: a second
			// watch (with its own clock on the sim world) or an apply
			// would record every change twice.
			if err := ws.holdLock(ctx, state.WatchHolder); err != nil {
				return err
			}
			w.Reconcile = func(ctx context.Context, set watch.Set, keys []string, reason string) map[string]watch.Result {
				if shards != nil {
					defer shards.h.Busy()()
				}
				// Every replica says what it loaded, with shards or not.
				dbg.selfMetrics().observeSet(len(set.Specs), set.Incomplete)
				sweep := false
				if shards != nil {
					var run bool
					if keys, sweep, run = shards.batch(ws, w.Queue, set, keys); !run {
						return nil
					}
				}
				if set.Env != nil && providerConfigs(set.Env) != providersAt {
					providersAt = providerConfigs(set.Env)
					slog.Warn("the Environment's providers changed: restart watch for them to take effect; its other settings apply now")
				}
				if set.Env != nil && set.Env.Spec.State != stateAt {
					// The state (and the lock this process holds for its
					// life) stays where it was: a second process reading
					// the new path would take another lock beside this one.
					stateAt = set.Env.Spec.State
					slog.Warn("the Environment's state changed: this watch keeps the state and lock it started with; restart it to move (other processes refuse while it runs only if they use the same state)", "state", ws.statePath)
				}
				if set.Env != nil && set.Env.Spec.Tick.D() != tickAt {
					tickAt = set.Env.Spec.Tick.D()
					w.SetTick(tickAt)
					dbg.selfMetrics().observeTick(tickAt)
				}
				res, err := reconcileBatch(ctx, ws, w.Queue, set, keys, reason, clk, tickAt, said, dbg.selfMetrics())
				if err != nil && sweep {
					shards.sweep.Store(true) // the next reconcile tries again
				}
				return res
			}
			// Providers that stream world changes trigger a reconcile; a
			// stream that ends (the provider restarted) is resubscribed.
			// An event's reason maps to the specs reading its object (all
			// of them when none does), through Subscribe's send.
			var routed sync.Map
			for name, p := range ws.providers {
				if sc, _ := p.Schema(ctx); !sc.Events {
					continue
				}
				go watch.Subscribe(ctx, name, func(ctx context.Context, send func(string) error) error {
					return p.Events(ctx, clk.Now(), func(e providers.Event) error {
						// Only the specs reading the object that changed; an
						// event about no known object reconciles them all.
						reason := eventReason(name, e)
						routed.Store(reason, ws.readers(e.Address))
						return send(reason)
					})
				}, nil, func(reason string) {
					keys, _ := routed.LoadAndDelete(reason)
					if ks, _ := keys.([]string); len(ks) > 0 {
						w.Trigger(reason, ks...)
						return
					}
					w.Trigger(reason)
				}, slog.Default())
			}
			slog.Info("watching", "dir", args[0], "tick", w.Tick, "specs", len(set.Specs))
			if err := w.Run(ctx); err != nil {
				return err
			}
			if err := lockLost(ctx); err != nil {
				// Non-zero, so a supervisor starts it again: the new
				// process locks the state anew, or refuses, naming whoever
				// took it meanwhile.
				return fmt.Errorf("%w; watch stopped so as never to apply beside another process: run it again to lock the state anew", errors.Unwrap(err))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&debounce, "debounce", 20*time.Millisecond, "wait this long after an edit for more edits")
	// Tests prove that file events alone bring every change in.
	cmd.Flags().BoolVar(&noTickRescan, "no-tick-rescan", false, "do not re-read the spec files by digest on each tick (for tests)")
	_ = cmd.Flags().MarkHidden("no-tick-rescan")
	cmd.Flags().IntVar(&shardCount, "shards", kstate.DefaultShards, "with the state in the cluster: how many shards the specs are spread over (each a Lease, held by one replica)")
	cmd.Flags().DurationVar(&leaseDuration, "lease-duration", 15*time.Second, "with the state in the cluster: how long a replica that stops renewing keeps its shards")
	cmd.Flags().DurationVar(&copyLag, "copy-lag", engine.DefaultCopyLag, "with the state in the cluster: how far a replica's copy of the spec directory may trail its swap time (the kubelet's change detection; its TTL with the Cache strategy): a gone spec is released only from a copy newer than the field's last apply by this")
	cmd.Flags().StringVar(&healthAddr, "health-addr", "", "serve /healthz and /readyz on this address (e.g. :8081)")
	cmd.Flags().StringVar(&debugAddr, "debug-addr", "", "serve POST /debug/promql/eval, GET /debug/store and GET /metrics on this address (e.g. 127.0.0.1:8082); loopback only unless --debug-token-file")
	cmd.Flags().StringVar(&debugTokenFile, "debug-token-file", "", "require \"Authorization: Bearer TOKEN\" on the debug endpoints, TOKEN read from this file; needed to bind --debug-addr beyond loopback")
	return cmd
}

// stateLockLost is watch's end when the lock file it holds was removed or
// replaced: another process could lock the state beside it.
type stateLockLost struct{ error }

func (e stateLockLost) Unwrap() error { return e.error }

// lockLost is why ctx's watch stopped for its lock, nil while it holds it.
func lockLost(ctx context.Context) error {
	var l stateLockLost
	if errors.As(context.Cause(ctx), &l) {
		return l
	}
	return nil
}

// lockCheckEvery is how often a watch looks at its lock file between
// reconciles: a tick can be long, and a watch that cannot reconcile must
// stop for its supervisor to restart it.
const lockCheckEvery = time.Second

// watchStateLock cancels the watch (lost) once its lock file is removed
// or replaced (a reconcile meanwhile finds it too, before it loads the
// state: workspace.loadRunSave). Locking the new file in place is not provably safe: another
// process may have locked it while a reconcile of this one was running,
// and the two may already have interleaved; an exit shows that (exit
// code, the supervisor's restarts) where a quiet re-lock would hide it,
// and the new process starts from the state as it is.
func watchStateLock(ctx context.Context, lockGone func() error, lost context.CancelCauseFunc) {
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := lockGone(); err != nil {
				slog.Error("the state lock is gone: stopping", "error", err)
				lost(stateLockLost{err})
				return
			}
		}
	}
}

// maxShards bounds --shards: each shard is a Lease every replica looks at
// each second.
const maxShards = 1024

var (
	shardCount    int
	healthAddr    string
	leaseDuration time.Duration
	copyLag       time.Duration
)

// shardSet is the shards this replica holds, when the state is in the
// cluster; nil holds everything (the state is local, one writer).
type shardSet struct {
	h *kstate.Holder
	n int
	// groups are the spec groups of the reconcile in progress (one at a
	// time: the watch has one worker), computed once by mine.
	groups map[string]string
	// sweep: the shards changed since the last reconcile planned this
	// replica's releases. A gone spec's shard may be newly this
	// replica's, and no key names a spec the watch never had, so the
	// next reconcile plans them though it has no live spec to plan.
	sweep atomic.Bool
	// copyAt is the copy time of the directory the last reconcile had.
	copyAt time.Time
}

// batch turns the watch's batch into this replica's: the keys of the specs
// whose shards it holds (never nil: an empty focus plans releases only),
// whether this is a sweep, and whether to reconcile at all.
func (s *shardSet) batch(ws *workspace, q *watch.Queue, set watch.Set, keys []string) (mine []string, sweep, run bool) {
	if s.h.Down() {
		// Said once by the holder; everything waits for the server. What
		// this batch held may be a gone spec's key, which no tick brings
		// back: the first reconcile after the server answers sweeps.
		s.sweep.Store(true)
		return nil, false, false
	}
	sweep = s.sweep.Swap(false)
	if set.At.After(s.copyAt) {
		s.copyAt = set.At
		if len(ws.heldGone) > 0 {
			// A newer copy of the directory may settle the releases the
			// last plan held (for the copy's age, or a guard a fixed file
			// lifts): planned again, as a batch of their own.
			q.AddWithReason("a newer copy of the specs", ws.heldGone...)
		}
	}
	mine = s.mine(ws, set, keys)
	return mine, sweep, len(mine) > 0 || sweep
}

// startShards makes this watch one replica of many when the state is in
// the cluster: it holds its share of the shard Leases, reconciles only the
// specs of those, and reconciles every spec when its shards change (the
// ones it gained are then its own). It serves health on addr.
//
// lockGone says why this process no longer holds the state lock (nil: it
// does); /healthz and /readyz ask it, so they fail from the moment the
// lock file goes, before the watch has stopped.
func startShards(ctx context.Context, ws *workspace, w *watch.Watcher, n int, addr string, m *selfMetrics, lockGone func() error) *shardSet {
	var ss *shardSet
	if kb, ok := ws.state.(*kstate.Backend); ok {
		kb.Shards = n
		kb.LeaseDuration = leaseDuration
		if leaseDuration < 2*time.Second {
			// A Lease counts whole seconds and is renewed every third.
			slog.Warn("--lease-duration below 2s: using 2s", "given", leaseDuration)
			kb.LeaseDuration = 2 * time.Second
		}
		h := kb.NewHolder("setpoint watch")
		m.observeShards(n, 0)
		ss = &shardSet{h: h, n: n}
		h.OnChange = func(owned []int) {
			m.observeShards(n, len(owned))
			ss.sweep.Store(true)
			w.Trigger("shards changed")
		}
		go func() { _ = h.Run(ctx) }()
		// Right before the provider applies, every spec of the plan must
		// still be this replica's.
		ws.fence = ss.fence
		ws.owns = func(id string) bool { return ss.h.Owns(ss.shardOf(id)) }
	}
	if addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
			// Asked here rather than remembered: from the moment the lock
			// file goes, no reconcile runs, though the watch may take a
			// moment (a reconcile in flight) to stop.
			if err := lockGone(); err != nil {
				http.Error(rw, err.Error(), http.StatusServiceUnavailable)
				return
			}
			rw.Write([]byte("ok\n"))
		})
		// The watch's metrics, without a token: what a health port
		// shows a scraper is no secret, unlike the debug endpoints'
		// queries and store.
		mux.Handle("/metrics", onlyGet(watchMetrics().handler()))
		mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
			if ss != nil && !ss.h.Healthy() {
				http.Error(rw, "the shard leases could not be read or renewed", http.StatusServiceUnavailable)
				return
			}
			if err := lockGone(); err != nil {
				http.Error(rw, err.Error(), http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintf(rw, "ok %s\n", ss.describe())
		})
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		if ln, err := net.Listen("tcp", addr); err != nil {
			slog.Error("health server", "addr", addr, "err", err)
		} else {
			// The address bound (a port 0 asked for is chosen here).
			slog.Info("serving health", "addr", ln.Addr().String())
			go func() {
				if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
					slog.Error("health server", "addr", addr, "err", err)
				}
			}()
		}
		go func() { <-ctx.Done(); _ = srv.Close() }()
	}
	return ss
}

func (s *shardSet) describe() string {
	if s == nil {
		return "(local state: every spec)"
	}
	return fmt.Sprintf("shards %v of %d", s.h.Owned(), s.n)
}

// mine keeps the keys of the specs whose group's shard this replica holds.
func (s *shardSet) mine(ws *workspace, set watch.Set, keys []string) []string {
	ws.mu.Lock()
	ws.eng.Specs = set.Specs // the groups of the specs as they are now
	s.groups = ws.eng.Groups()
	ws.mu.Unlock()
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if s.h.Owns(s.shardOf(k)) {
			out = append(out, k)
		}
	}
	return out
}

// shardOf is the shard of a spec's group, as mine grouped the specs for
// the reconcile in progress.
func (s *shardSet) shardOf(id string) int {
	g, ok := s.groups[id]
	if !ok {
		g = id
	}
	return kstate.ShardOf(g, s.n)
}

// fence refuses to apply changes of specs whose shard this replica no
// longer holds (it was given up, or its Lease lapsed, since mine).
func (s *shardSet) fence(specs []string) error {
	for _, id := range specs {
		if i := s.shardOf(id); !s.h.Owns(i) {
			return fmt.Errorf("shard %d of %s is no longer this replica's: not applied (its holder reconciles it)", i, id)
		}
	}
	return nil
}

// reconcileKeys plans the given specs (and every spec sharing a target
// with them) and applies what the gate lets through. Each spec with a held
// change that becomes due later is requeued for exactly then: the wait is
// measured on clk when the reconcile ends (the queue's timers run on the
// same clock, virtual or not), so the time the plan took is not added.
// Errors naming a spec are retried with backoff.
//
// said remembers the holds and warnings last logged, so that each is said
// at the default level when it starts or changes, not at every tick; nil
// logs none.
func reconcileKeys(ctx context.Context, ws *workspace, q *watch.Queue, set watch.Set, keys []string, reason string, clk watch.Clock, lockWait time.Duration, said *logged) map[string]watch.Result {
	res, _ := reconcileBatch(ctx, ws, q, set, keys, reason, clk, lockWait, said, nil)
	return res
}

// reconcileBatch is reconcileKeys recording into m (nil: nothing), which
// only watch with its debug endpoints has, and also returning the error
// that kept the whole batch from being planned (the state unreadable, say).
func reconcileBatch(ctx context.Context, ws *workspace, q *watch.Queue, set watch.Set, keys []string, reason string, clk watch.Clock, lockWait time.Duration, said *logged, m *selfMetrics) (map[string]watch.Result, error) {
	defer m.observeReconcile(time.Now())
	var now time.Time
	ws.mu.Lock()
	if set.Env != nil {
		ws.env = set.Env
		ws.eng.Env = set.Env
	}
	ws.eng.Specs = set.Specs
	ws.eng.Incomplete = set.Incomplete
	ws.eng.View, ws.eng.Releases = nil, ws.owns
	if ws.owns != nil && !ws.virtual() {
		// One replica of several, each with its own copy of the
		// directory: a spec missing from a copy that lags may be one
		// another replica already applied from a newer copy. (A virtual
		// clock's times are not the copy's.)
		ws.eng.View = &engine.DirView{At: set.At, Lag: copyLag}
	}
	ws.mu.Unlock()
	res := map[string]watch.Result{}
	var p *plan.Plan
	failed := map[string]error{}
	// Specs with a change applied short of what they wanted (a bounded
	// step) look again at once: the next plan says when the rest is due.
	more := map[string]bool{}
	var heldGone []string
	err := ws.withState(ctx, state.WatchHolder, lockWait, func(st *state.State) error {
		now = clk.Now() // after any wait for the lock
		p = ws.eng.Plan(ctx, now, st, keys)
		if ws.owns != nil {
			for _, c := range p.Held {
				if c.Release {
					heldGone = append(heldGone, c.Spec)
				}
			}
		}
		m.observePlan(p)
		for _, e := range p.Errors {
			slog.Error("plan", "spec", e.Spec, "at", e.Pos.String(), "error", e.Message)
			if _, ok := failed[e.Spec]; !ok {
				failed[e.Spec] = fmt.Errorf("%s", e.Error())
			}
		}
		settles := newSettled(p, set, keys)
		logHolds(p, said, reason, settles)
		logWarnings(p, said, settles)
		if p.Empty() {
			slog.Debug("reconciled", "reason", reason, "held", len(p.Held))
			return nil
		}
		results := ws.apply(context.WithoutCancel(ctx), now, p, st)
		m.observeApplies(results)
		for _, r := range results {
			c := r.Change
			if r.Err != "" {
				// Apply logged it with the spec's position; every spec
				// that decided the value retries it.
				for _, id := range append([]string{c.Spec}, c.By...) {
					failed[id] = fmt.Errorf("%s", r.Err)
				}
				continue
			}
			if c.To != c.Wanted {
				for _, id := range append([]string{c.Spec}, c.By...) {
					more[id] = true
				}
			}
			if c.Release {
				slog.Info("released", "reason", reason, "address", c.Address.String(), "attribute", c.Attribute.String(), "value", c.To, "why", c.Reason)
				continue
			}
			slog.Info("applied", "reason", reason, "address", c.Address.String(), "attribute", c.Attribute.String(), "from", c.From, "to", c.To, "wanted", c.Wanted, "why", c.Reason)
		}
		return nil
	})
	m.observeResult(err != nil || len(failed) > 0)
	if err != nil {
		slog.Error("reconcile", "reason", reason, "error", err)
		for _, k := range keys {
			res[k] = watch.Result{Err: err}
		}
		return res, err
	}
	inBatch := map[string]bool{}
	for _, k := range keys {
		inBatch[k] = true
	}
	for id, e := range failed {
		if id == "" {
			continue
		}
		if inBatch[id] {
			res[id] = watch.Result{Err: e}
		} else {
			q.AddRateLimited(id) // planned with the batch for sharing a target
		}
	}
	for id := range more {
		if _, due := p.Due[id]; due || failed[id] != nil {
			continue
		}
		// At most once a second: with no cooldown and no window the
		// steps are paced by this alone.
		if inBatch[id] {
			res[id] = watch.Result{RequeueAfter: time.Second}
		} else {
			q.AddAfter(id, time.Second)
		}
	}
	end := clk.Now()
	for id, due := range p.Due {
		after := due.Sub(end)
		if after <= 0 {
			after = time.Millisecond
		}
		if inBatch[id] {
			if _, bad := res[id]; !bad {
				res[id] = watch.Result{RequeueAfter: after}
			}
			continue
		}
		// Planned with the batch for sharing a target; its own due time.
		q.AddAfter(id, after)
	}
	slices.Sort(heldGone)
	ws.heldGone = slices.Compact(heldGone)
	return res, nil
}

// logged is what watch said last, so that a hold or a spec's warnings are
// said when they start or change, said again when they return after
// ending, and not at every reconcile.
type logged struct {
	holds    map[string]heldLog // "address attribute" → its hold
	warnings map[string]string  // spec → its warnings, a line each
}

// heldLog is a hold said: its kind, and the specs that decided it (a plan
// of any of them plans the attribute: they share its object).
type heldLog struct {
	kind  string
	specs []string
}

// settled says whose holds and warnings a reconcile's plan settles, from
// what the watch has (the keys it asked for, the specs in force), not
// from the plan's Specs and Observed, which are filled only when a plan
// is written out.
type settled struct {
	asked, live, failed map[string]bool
}

func newSettled(p *plan.Plan, set watch.Set, keys []string) settled {
	s := settled{asked: map[string]bool{}, live: map[string]bool{}, failed: map[string]bool{}}
	for _, k := range keys {
		s.asked[k] = true
	}
	for _, d := range set.Specs {
		s.live[d.Head().ID()] = true
	}
	// A spec whose plan failed (an object that could not be read) holds
	// nothing and warns of nothing, which says nothing of an end.
	for _, e := range p.Errors {
		s.failed[e.Spec] = true
	}
	return s
}

// planned: the spec was asked for and planned.
func (s settled) planned(id string) bool { return s.asked[id] && !s.failed[id] }

// gone: the spec is no longer in force. What it held (a release waiting
// for its confirmation) is planned whatever a plan's focus.
func (s settled) gone(id string) bool { return !s.live[id] && !s.failed[id] }

// logHolds says each hold when it starts or changes kind, at the default
// level: a hold is what a user waits on. A hold is forgotten when it ends
// (applied, or no longer wanted), so that its return is said again.
func logHolds(p *plan.Plan, said *logged, reason string, s settled) {
	if said == nil {
		return
	}
	if said.holds == nil {
		said.holds = map[string]heldLog{}
	}
	now := map[string]bool{}
	for _, c := range p.Held {
		k := c.Address.String() + " " + c.Attribute.String()
		now[k] = true
		kind := c.Held.Kind.String()
		if c.Held.Kind == plan.HoldRelease {
			// One kind, several causes (a file that does not load, the
			// vanished-specs guard, a copy too old): each said anew.
			kind += ": " + c.Held.Detail
		}
		was, ok := said.holds[k]
		said.holds[k] = heldLog{kind: kind, specs: append([]string{c.Spec}, c.By...)}
		if ok && was.kind == kind {
			continue
		}
		slog.Info("held", "reason", reason, "address", c.Address.String(), "attribute", c.Attribute.String(), "from", c.From, "to", c.To, "hold", c.Held.String())
	}
	for k, h := range said.holds {
		if now[k] {
			continue
		}
		// Not held in a plan of its attribute: the hold ended. An
		// attribute this plan did not look at says nothing.
		if slices.ContainsFunc(h.specs, s.planned) || !slices.ContainsFunc(h.specs, func(id string) bool { return !s.gone(id) }) {
			delete(said.holds, k)
		}
	}
}

// logWarnings says a spec's warnings (a signal source down, activity that
// cannot be read: the decision holds) once when they start or change, and
// that they cleared once a plan of the spec has none.
func logWarnings(p *plan.Plan, said *logged, s settled) {
	if said == nil {
		return
	}
	if said.warnings == nil {
		said.warnings = map[string]string{}
	}
	now := map[string]string{}
	for _, n := range p.Notes {
		if n.Severity == diag.Warning {
			now[n.Spec] += n.Message + "\n"
		}
	}
	for id, msg := range now {
		if said.warnings[id] == msg {
			continue
		}
		said.warnings[id] = msg
		for _, line := range strings.Split(strings.TrimSuffix(msg, "\n"), "\n") {
			slog.Warn("note", "spec", id, "message", line)
		}
	}
	for id := range said.warnings {
		// A note of no spec (an apply cut off) is said again only when
		// it changes: no plan is the plan of no spec.
		if id == "" || now[id] != "" {
			continue
		}
		switch {
		case s.planned(id):
			delete(said.warnings, id)
			slog.Info("notes cleared", "spec", id)
		case s.gone(id):
			delete(said.warnings, id) // deleted with its spec: nothing to say
		}
	}
}

// eventReason says why a reconcile runs, bounded: a provider's text is
// not trusted to be short.
func eventReason(provider string, e providers.Event) string {
	r := fmt.Sprintf("event from %s: %s %s", provider, e.Address, e.Reason)
	if len(r) > 200 {
		r = strings.ToValidUTF8(r[:200], "") + "…"
	}
	return r
}

// providerConfigs summarises what starting the providers depends on.
func providerConfigs(env *spec.Environment) string {
	b, _ := json.Marshal([]any{env.Spec.Providers, env.Spec.PluginPath})
	return string(b)
}
