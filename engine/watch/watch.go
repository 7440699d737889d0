// Package watch keeps a spec directory reconciled, shaped like a
// controller-runtime controller: sources (file events, a periodic tick,
// provider events) put spec keys on a de-duplicating work queue; one worker
// takes every due key at once, reconciles them as one batch against the
// specs in force, and requeues each key as its Result says (again after a
// delay, with backoff after an error, or not at all).
//
// An edit (debounced) enqueues the specs of the files it touched, a removed
// file's specs included so the reconciler sees them gone. A broken edit is
// reported and the last good version of that file keeps running.
package watch

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

// Set is the specs in force: the last good documents of every file.
type Set struct {
	Env   *spec.Environment
	Specs []spec.Document // every kind but the Environment
	// Incomplete says some spec file does not load now (its last good
	// version, if any, is in Specs): a spec missing from Specs may be
	// broken rather than deleted.
	Incomplete bool
	// At bounds how current the set is: the directory's content as of At
	// or later (see copyTime). A copy that lags its source (a ConfigMap
	// volume) cannot tell a deleted spec from one not delivered yet.
	At time.Time
}

// Select returns the specs in force with these keys, in set order; keys no
// longer in the set (removed specs) have none.
func (s Set) Select(keys []string) []spec.Document {
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	var out []spec.Document
	for _, d := range s.Specs {
		if want[d.Head().ID()] {
			out = append(out, d)
		}
	}
	return out
}

// Result of reconciling one key.
type Result struct {
	// RequeueAfter > 0: reconcile this key again then (a stability window
	// or cooldown ends, a wake-up is due). Ignored when Err is set.
	RequeueAfter time.Duration
	// Err is retried with backoff, unless Terminal(err).
	Err error
}

// Reconciler reconciles a batch of keys against the specs in force and
// returns one Result per key (a key missing from the map: done, no requeue;
// keys not in the batch are ignored). Keys may name specs no longer in the
// set: those were removed.
type Reconciler func(ctx context.Context, set Set, keys []string, reason string) map[string]Result

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// Terminal marks err as not to be retried (like controller-runtime's
// reconcile.TerminalError). Terminal(nil) is nil.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err}
}

// IsTerminal reports whether err, or an error it wraps, was marked Terminal.
func IsTerminal(err error) bool {
	var t *terminalError
	return errors.As(err, &t)
}

// Watcher watches one directory. Set the exported fields before Load or Run
// and do not change them afterwards.
type Watcher struct {
	Dir    string
	Loader *load.Loader
	// Tick enqueues every key this often on Clock (0: never).
	Tick time.Duration
	// Debounce is how long (wall time) to wait after a file event or a
	// trigger for more; a steady stream fires at least every 10 × Debounce.
	Debounce  time.Duration
	Reconcile Reconciler
	Log       *slog.Logger
	// Triggers carries reasons to reconcile every key: provider events (a
	// world change), debounced like edits. Trigger is the same as a method.
	Triggers <-chan string
	// Clock is the engine's time, for the tick and, when Queue is nil, the
	// queue (nil: the wall clock).
	Clock Clock
	// Queue holds the keys to reconcile; nil: a new queue on Clock. It
	// survives a stop of Run.
	Queue *Queue
	// NoTickRescan turns off the tick's backstop: re-reading every spec
	// file by content digest on each tick, for changes no file event
	// reported (file systems that send none, a watch that was lost). Only
	// tests that prove the event path set it.
	NoTickRescan bool

	mu       sync.Mutex
	files    map[string][]spec.Document // last good documents per file
	seen     map[string]stamp           // each file's content as last read, accepted or not
	rejected map[string]bool            // files held back by a rule across files: retried with every edit
	broken   map[string]bool            // files whose content as last read does not load
	trig     triggers
	trigWake chan struct{}
	tickSet  chan time.Duration // SetTick's new period, for the loop
	running  bool
	// tree is the directory tree as last scanned: the directories the
	// loader walks (by the path it walks them under) and the files there.
	// Only the loop goroutine uses it.
	tree tree

	// wall is the debounce's clock (nil: the wall clock), a seam for
	// tests: a fake one fires the debounce only when a test says so.
	wall Clock

	// copyAt is Set's At: the copy time read before the last full scan
	// whose changes were all applied.
	copyAt time.Time
}

// copyTime is a lower bound on how current the content under root is: when
// the kubelet swapped in a ConfigMap or Secret volume's content (its ..data
// symlink), or a tool like git-sync swapped the root itself (a symlink to
// its latest worktree); a plain directory is its own source, current when
// read (now). Read before the content: a swap in between only makes the
// content newer than said. Zero while a swap is half done (the kubelet
// links a new key's file only after the swap), when the content read now
// may lack what the swap brought.
func copyTime(root string, now time.Time) time.Time {
	data := filepath.Join(root, "..data")
	if fi, err := os.Lstat(data); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		names, err := os.ReadDir(data)
		if err != nil {
			return time.Time{}
		}
		for _, n := range names {
			if strings.HasPrefix(n.Name(), ".") {
				continue
			}
			if _, err := os.Lstat(filepath.Join(root, n.Name())); err != nil {
				return time.Time{}
			}
		}
		return fi.ModTime()
	}
	if fi, err := os.Lstat(root); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fi.ModTime()
	}
	return now
}

func (w *Watcher) wallNow() time.Time {
	if w.wall != nil {
		return w.wall.Now()
	}
	return time.Now()
}

// tree is what a scan found: the logical directories (as the loader walks
// them, symlinks unresolved) and, for the watches, every directory whose
// entries can change what those paths resolve to.
type tree struct {
	dirs  map[string]bool // logical directories walked
	files map[string]bool // spec files found
	// refused are the loader walk's diagnostics by path: what exists
	// there is not read, and is broken, not gone.
	refused map[string]load.Diagnostics
	// watched is what each watched path resolved to when it was watched:
	// a symlink swapped to a new target is another file under the path.
	watched map[string]os.FileInfo
}

// SetTick changes the tick's period (0: no tick) while Run runs: an
// Environment edit of its tick takes effect at once, counted from now.
func (w *Watcher) SetTick(d time.Duration) {
	w.mu.Lock()
	w.init()
	w.Tick = d
	ch := w.tickSet
	w.mu.Unlock()
	for {
		select {
		case ch <- d:
			return
		default:
		}
		// A period not yet taken is replaced by this one.
		select {
		case <-ch:
		default:
		}
	}
}

// stamp is a file's content as last read: a digest, not a modification
// time (two writes within one tick of the file system's clock look alike).
type stamp [sha256.Size]byte

// triggers collects Trigger calls until the debounce fires.
type triggers struct {
	all        bool
	allReasons []string
	keys       map[string][]string
}

// init makes the internal maps. w.mu is held.
func (w *Watcher) init() {
	if w.trigWake == nil {
		w.trigWake = make(chan struct{}, 1)
	}
	if w.tickSet == nil {
		w.tickSet = make(chan time.Duration, 1)
	}
	if w.broken == nil {
		w.broken = map[string]bool{}
	}
	if w.Queue == nil {
		w.Queue = NewQueue(w.Clock)
	}
}

func (w *Watcher) log() *slog.Logger {
	if w.Log != nil {
		return w.Log
	}
	return slog.Default()
}

func (w *Watcher) clock() Clock {
	if w.Clock != nil {
		return w.Clock
	}
	if w.Queue != nil {
		return w.Queue.Clock()
	}
	return RealClock{}
}

func (w *Watcher) root() string { return filepath.Clean(w.Dir) }

// Load reads every file once, before watching. Run calls it if it was not
// called; a second Run does not (the last good versions survive a stop).
func (w *Watcher) Load() load.Diagnostics {
	at := copyTime(w.root(), w.wallNow())
	sc, _ := scanTree(w.root())
	seen := map[string]stamp{}
	for _, p := range sc.files {
		if st, err := w.stamp(p); err == nil {
			seen[p] = st
		}
	}
	refused := byPath(sc.refused)
	for p, ds := range refused {
		// Stamped as changedSince stamps it, so the first rescan does not
		// report the refusal again.
		seen[p] = refusalStamp(ds)
	}
	r := w.Loader.LoadDir(w.root())
	files := map[string][]spec.Document{}
	for _, d := range r.Documents {
		f := filepath.Clean(d.Head().Src.Pos.File)
		files[f] = append(files[f], d)
	}
	broken := map[string]bool{}
	for _, d := range r.Diags {
		if d.Severity == diag.Error {
			broken[filepath.Clean(d.Pos.File)] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	w.files, w.seen, w.rejected, w.broken = files, seen, map[string]bool{}, broken
	w.copyAt = at
	return r.Diags
}

// Set returns the specs in force.
func (w *Watcher) Set() Set {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Set{Incomplete: len(w.broken)+len(w.rejected) > 0, At: w.copyAt}
	for _, f := range slices.Sorted(maps.Keys(w.files)) {
		for _, d := range w.files[f] {
			switch x := d.(type) {
			case *spec.Environment:
				if s.Env == nil {
					s.Env = x
				}
			default:
				s.Specs = append(s.Specs, x)
			}
		}
	}
	return s
}

// Keys returns the key of every spec in force but the Environment, sorted.
func (w *Watcher) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys()
}

func (w *Watcher) keys() []string {
	var out []string
	for _, ds := range w.files {
		out = appendIDs(out, ds)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appendIDs appends the keys of docs but the Environment's.
func appendIDs(out []string, docs []spec.Document) []string {
	for _, d := range docs {
		if h := d.Head(); h.Kind != "Environment" {
			out = append(out, h.ID())
		}
	}
	return out
}

func hasEnv(docs []spec.Document) bool {
	return slices.ContainsFunc(docs, func(d spec.Document) bool { return d.Head().Kind == "Environment" })
}

// Trigger asks for a reconcile of keys (none: every key) for reason,
// debounced. It may be called from any goroutine, also while Run is not
// running (a start reconciles everything anyway).
func (w *Watcher) Trigger(reason string, keys ...string) {
	w.mu.Lock()
	w.init()
	if len(keys) == 0 {
		w.trig.all = true
		w.trig.allReasons = addReason(w.trig.allReasons, reason)
	} else {
		if w.trig.keys == nil {
			w.trig.keys = map[string][]string{}
		}
		for _, k := range keys {
			w.trig.keys[k] = addReason(w.trig.keys[k], reason)
		}
	}
	wake := w.trigWake
	w.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// flushTriggers enqueues the triggers collected so far.
func (w *Watcher) flushTriggers() {
	w.mu.Lock()
	t := w.trig
	w.trig = triggers{}
	var all []string
	if t.all {
		all = w.keys()
	}
	w.mu.Unlock()
	if t.all {
		w.Queue.AddWithReason(JoinReasons(t.allReasons), all...)
	}
	for _, k := range slices.Sorted(maps.Keys(t.keys)) {
		for _, r := range t.keys[k] {
			w.Queue.AddWithReason(r, k)
		}
		if len(t.keys[k]) == 0 {
			w.Queue.Add(k)
		}
	}
}

// Run watches until ctx ends, reconciling with one worker: everything at
// start, every key on each tick and trigger, and the specs of the touched
// files after each debounced edit. It can be called again after it returns
// (leader election starts and stops it): the queue and the last good files
// survive; edits made meanwhile are read at the next start, which enqueues
// every key again.
func (w *Watcher) Run(ctx context.Context) error {
	if w.Reconcile == nil {
		return errors.New("watch: no Reconcile")
	}
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("watch: already running")
	}
	w.running = true
	w.init()
	loaded := w.files != nil
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	if !loaded {
		for _, d := range w.Load() {
			w.log().Error("invalid spec", "error", d.Error())
		}
	}

	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", w.Dir, err)
	}
	defer fw.Close()
	w.tree = tree{}
	at := copyTime(w.root(), w.wallNow())
	paths, err := w.watchTree(fw)
	if err != nil {
		return fmt.Errorf("watching %s: %w", w.Dir, err)
	}

	// Edits made since Load or while stopped, then everything.
	keys, _ := w.apply(w.changedSince(paths), at)
	w.mu.Lock()
	w.trig = triggers{}
	keys = append(keys, w.keys()...)
	wake := w.trigWake
	w.mu.Unlock()
	q := w.Queue
	q.AddWithReason("start", keys...)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { w.work(ctx) })

	w.mu.Lock()
	tick := &ticker{clk: w.clock(), d: w.Tick}
	tickSet := w.tickSet
	w.mu.Unlock()
	defer tick.stop()
	err = w.loop(ctx, fw, wake, tick, tickSet)
	w.log().Info("stopped watching", "dir", w.Dir, "reason", stopReason(ctx, err))
	return err
}

func stopReason(ctx context.Context, err error) string {
	if err != nil {
		return err.Error()
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause.Error()
	}
	return "stopped"
}

// loop handles the sources until ctx ends.
func (w *Watcher) loop(ctx context.Context, fw *fsnotify.Watcher, wake <-chan struct{}, tick *ticker, tickSet <-chan time.Duration) error {
	wall := w.wall
	if wall == nil {
		wall = RealClock{}
	}
	edits := newDebouncer(wall, w.Debounce)
	defer edits.stop()
	trig := newDebouncer(wall, w.Debounce)
	defer trig.stop()
	pending := map[string]bool{}
	rescan := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.c():
			tick.rearm()
			if !w.NoTickRescan {
				// The backstop: what no event reported is read now, by
				// digest, so only files that changed are loaded again.
				if keys, reason := w.apply(w.rescan(fw)); len(keys) > 0 {
					w.log().Warn("spec files changed without a file event; found on the tick", "specs", len(keys))
					w.Queue.AddWithReason(reason, keys...)
				}
			}
			w.Queue.AddWithReason("tick", w.Keys()...)
		case d := <-tickSet:
			if d != tick.d {
				tick.stop()
				tick.d, tick.t = d, nil
				w.log().Info("tick changed", "tick", d)
			}
		case why := <-w.Triggers:
			w.Trigger(why)
		case <-wake:
			trig.poke()
		case <-trig.c():
			trig.fired()
			w.flushTriggers()
		case ev, ok := <-fw.Events:
			if !ok {
				return errors.New("watch: file events closed")
			}
			if w.event(ev, pending) {
				rescan = true
			}
			if len(pending) > 0 || rescan {
				edits.poke()
			}
		case err, ok := <-fw.Errors:
			if !ok {
				return errors.New("watch: file events closed")
			}
			w.log().Error("watch", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost (a checkout of many files at once):
				// what changed is found by scanning.
				rescan = true
				edits.poke()
			}
		case <-edits.c():
			edits.fired()
			var at time.Time
			if rescan {
				rescan = false
				var changed map[string]bool
				changed, at = w.rescan(fw)
				maps.Copy(pending, changed)
			}
			keys, reason := w.apply(pending, at)
			clear(pending)
			if len(keys) > 0 {
				w.Queue.AddWithReason(reason, keys...)
			}
		}
	}
}

// event notes the spec file a file event names, or reports that the tree
// must be scanned again: anything else that moved (a directory, a symlink
// swapped, as a ConfigMap volume and git-sync publish a new version, or a
// file under a symlink's target) can change what every path resolves to.
func (w *Watcher) event(ev fsnotify.Event, pending map[string]bool) (rescan bool) {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	name := filepath.Clean(ev.Name)
	if w.tree.dirs[filepath.Dir(name)] {
		fi, err := os.Lstat(name)
		regular := err == nil && fi.Mode().IsRegular()
		switch {
		case load.IsSpecFile(name) && (err != nil || regular):
			// A file of a directory the loader walks, written or gone.
			w.log().Debug("file event", "file", name, "op", ev.Op.String())
			pending[name] = true
			return false
		case regular && !load.IsSpecFile(name):
			// An editor's swap or backup file beside the specs.
			return false
		}
	}
	w.log().Debug("file event: scanning again", "path", name, "op", ev.Op.String())
	return true
}

// verdict is what a spec file path holds now.
type verdict int

const (
	readable verdict = iota
	// gone: the path no longer exists (or is a directory now, walked as
	// one). Only then are its specs removed.
	gone
	// refused: the path exists but is not read, for whatever reason (a
	// link outside the spec directory or in a loop, a FIFO, a directory
	// above it the walk refuses): broken, so its last good version stands
	// and nothing of it is released, as a one-shot plan holds it.
	refused
)

// judge says what p holds by the rule the loader's walk judges by, from the
// last scan and the entry as it is now (a swap since the scan must not make
// a link outside be read, and a refused path removed since is gone).
// realRoot is the spec directory resolved. The loop goroutine calls it.
func (w *Watcher) judge(p, realRoot string) (verdict, load.Diagnostics) {
	root := w.root()
	if !w.tree.files[p] && p != root {
		// Under a directory the walk refuses, p is not read, whatever it
		// is now.
		if ds := w.refusedAt(filepath.Dir(p)); ds != nil {
			return refused, ds
		}
	}
	fi, err := os.Lstat(p)
	switch {
	case isGone(err):
		return gone, nil
	case err != nil:
		return refused, load.Diagnostics{{Pos: spec.Pos{File: p}, Message: fmt.Sprintf("cannot read %q: %s", filepath.Base(p), pathError(err)), Expected: "a spec file the walk can read"}}
	}
	en := load.Entry{Kind: load.EntryDir}
	switch {
	case p == root:
	case w.tree.dirs != nil && !w.tree.dirs[filepath.Dir(p)]:
		// Before the first scan (no dirs yet) Load read the tree as the
		// walk does; after it, a directory the walk no longer enters
		// without saying why above p is still no deletion.
		return refused, load.Diagnostics{{Pos: spec.Pos{File: p}, Message: fmt.Sprintf("%q is not read: the walk of the spec directory no longer reaches its directory", filepath.Base(p)),
			Expected: "a spec file in a directory the walk reads"}}
	default:
		en = load.ClassifyEntry(realRoot, p, fi.Mode().Type())
	}
	switch en.Kind {
	case load.EntrySpec:
		return readable, nil
	case load.EntryRefused:
		return refused, load.Diagnostics{en.Diag}
	}
	// A directory: its files are walked as their own, unless the walk
	// refuses it (a loop, a second link to a directory, one it cannot
	// read).
	if ds := w.tree.refused[p]; ds != nil {
		return refused, ds
	}
	return gone, nil
}

// refusedAt returns the last scan's diagnostics at the directory p or at
// the nearest one above it within the spec directory.
func (w *Watcher) refusedAt(p string) load.Diagnostics {
	root := w.root()
	for q := p; ; q = filepath.Dir(q) {
		if ds := w.tree.refused[q]; ds != nil {
			return ds
		}
		if q == root || filepath.Dir(q) == q {
			return nil
		}
	}
}

// isGone says an Lstat error means the path does not exist: missing, or a
// directory on its way is a file now.
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !isGone(err)
}

func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// refusalStamp stands for a refused path's content: a refusal is reported
// when it starts or changes, not at every rescan.
func refusalStamp(ds load.Diagnostics) stamp {
	h := sha256.New()
	io.WriteString(h, "refused\x00")
	for _, d := range ds {
		io.WriteString(h, d.Error()+"\x00")
	}
	return stamp(h.Sum(nil))
}

// byPath groups a walk's diagnostics by their (clean) path.
func byPath(ds load.Diagnostics) map[string]load.Diagnostics {
	out := map[string]load.Diagnostics{}
	for _, d := range ds {
		if d.Severity == diag.Error && d.Pos.File != "" {
			p := filepath.Clean(d.Pos.File)
			out[p] = append(out[p], d)
		}
	}
	return out
}

// rescan lists the tree again, re-resolving every symlink and moving the
// watches to where the paths lead now, and returns the spec files whose
// content differs from when they were last read (new, edited or removed).
func (w *Watcher) rescan(fw *fsnotify.Watcher) (map[string]bool, time.Time) {
	at := copyTime(w.root(), w.wallNow())
	paths, err := w.watchTree(fw)
	if err != nil {
		// The root itself is gone (mid-swap): the next event or tick scans
		// again; the specs in force keep running meanwhile.
		w.log().Warn("spec directory unreadable; the specs in force keep running", "dir", w.Dir, "error", err)
		return nil, time.Time{}
	}
	return w.changedSince(paths), at
}

// changedSince returns the files that differ from when they were last read:
// new, edited, refused or removed (paths is what the directory holds now).
// The loop goroutine calls it.
func (w *Watcher) changedSince(paths []string) map[string]bool {
	stamps := map[string]stamp{}
	for _, p := range paths {
		if st, err := w.stamp(p); err == nil {
			stamps[p] = st
		}
	}
	w.mu.Lock()
	others := map[string]bool{}
	for p := range w.seen {
		others[p] = true
	}
	for p := range w.files {
		others[p] = true
	}
	w.mu.Unlock()
	for p := range w.tree.refused {
		others[p] = true
	}
	// A path that exists but is not read is stamped by why, as apply
	// stamps it: it is broken, not removed.
	var refusedNow []string
	if realRoot, err := filepath.EvalSymlinks(w.root()); err == nil {
		for _, p := range slices.Sorted(maps.Keys(others)) {
			if _, ok := stamps[p]; ok {
				continue
			}
			if v, ds := w.judge(p, realRoot); v == refused {
				stamps[p] = refusalStamp(ds)
				refusedNow = append(refusedNow, p)
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]bool{}
	for _, p := range append(paths, refusedNow...) {
		if old, ok := w.seen[p]; !ok || old != stamps[p] {
			out[p] = true
		}
	}
	for p := range w.seen {
		if _, ok := stamps[p]; !ok {
			out[p] = true
		}
	}
	for p := range w.files {
		if _, ok := stamps[p]; !ok {
			out[p] = true
		}
	}
	return out
}

// candidate is one file re-read.
type candidate struct {
	path    string
	docs    []spec.Document
	removed bool
	edited  bool // named by an event, not a retry
	diags   load.Diagnostics
}

// apply re-reads the files (and those held back earlier by a rule across
// files), keeping the last good version of each broken one. It returns the
// keys to reconcile, old and new, and why.
//
// at, when not zero, is the copy time read before a full scan found paths:
// once they are applied the set is that current.
func (w *Watcher) apply(paths map[string]bool, at time.Time) ([]string, string) {
	realRoot, err := filepath.EvalSymlinks(w.root())
	if err != nil {
		// As rescan: the root itself is gone (mid-swap), which deletes no
		// spec; the next event or tick scans again.
		w.log().Warn("spec directory unreadable; the specs in force keep running", "dir", w.Dir, "error", err)
		return nil, ""
	}
	w.mu.Lock()
	all := maps.Clone(paths)
	for f := range w.rejected {
		all[f] = true
	}
	w.mu.Unlock()

	var cands []*candidate
	for _, p := range slices.Sorted(maps.Keys(all)) {
		c := &candidate{path: p, edited: paths[p]}
		v, why := w.judge(p, realRoot)
		var st stamp
		var err error
		switch v {
		case gone:
			c.removed = true
		case refused:
			c.diags, st = why, refusalStamp(why)
		default:
			st, err = w.stamp(p)
			w.mu.Lock()
			_, accepted := w.files[p]
			same := err == nil && accepted && w.seen[p] == st && !w.broken[p] && !w.rejected[p]
			w.mu.Unlock()
			switch {
			case same:
				// Named by an event but unchanged (a symlink swap that
				// moved the file's path to identical content, an
				// editor's touch).
				continue
			case errors.Is(err, fs.ErrNotExist) && !exists(p):
				c.removed = true // since it was judged
			default:
				c.diags = w.Loader.LoadFile(p, func(d spec.Document) { c.docs = append(c.docs, d) })
			}
		}
		w.mu.Lock()
		if c.removed {
			delete(w.seen, p)
		} else if err == nil {
			w.seen[p] = st
		}
		if c.diags.HasErrors() {
			w.broken[p] = true
		} else {
			delete(w.broken, p)
		}
		w.mu.Unlock()
		if c.diags.HasErrors() {
			w.mu.Lock()
			delete(w.rejected, p)
			w.mu.Unlock()
			switch {
			case v == refused:
				// Said once per refusal: changedSince stamps it by why.
				w.log().Error("spec path not read: broken, not gone; the last good version keeps running", "file", p, "error", c.diags)
			case c.edited:
				w.log().Error("edit rejected; the last good version keeps running", "file", p, "error", c.diags)
			}
			continue
		}
		for _, d := range c.diags {
			w.log().Warn("spec", "warning", d.Error())
		}
		cands = append(cands, c)
	}

	// Accept what keeps the rules across files; accepting one may clear the
	// way for another (a spec moved from one file to another), so repeat
	// until nothing changes.
	var keys []string
	var edited, removed []string
	envChanged := false
	w.mu.Lock()
	defer w.mu.Unlock()
	if at.After(w.copyAt) {
		// Every file the scan found changed is applied (or kept back,
		// which makes the set incomplete): the set is as current as the
		// scan.
		w.copyAt = at
	}
	done := map[*candidate]bool{}
	for progress := true; progress; {
		progress = false
		for _, c := range cands {
			if _, ok := done[c]; ok {
				continue
			}
			old, had := w.files[c.path]
			if !c.removed {
				before := crossCheck(w.files)
				w.files[c.path] = c.docs
				if fresh := newDiags(before, crossCheck(w.files)); len(fresh) > 0 {
					if had {
						w.files[c.path] = old
					} else {
						delete(w.files, c.path)
					}
					c.diags = fresh
					continue
				}
			} else {
				delete(w.files, c.path)
			}
			done[c] = true
			progress = true
			delete(w.rejected, c.path)
			keys = appendIDs(appendIDs(keys, old), c.docs)
			envChanged = envChanged || hasEnv(old) || hasEnv(c.docs)
			name := w.rel(c.path)
			if c.removed {
				if had {
					removed = append(removed, name)
				}
			} else {
				edited = append(edited, name)
			}
		}
	}
	for _, c := range cands {
		if _, ok := done[c]; ok {
			continue
		}
		if c.edited || !w.rejected[c.path] {
			w.log().Error("edit rejected; the last good version keeps running", "file", c.path, "error", c.diags)
		}
		w.rejected[c.path] = true
	}
	if envChanged {
		keys = append(keys, w.keys()...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var why []string
	if len(edited) > 0 {
		why = append(why, "edit of "+strings.Join(edited, ", "))
	}
	if len(removed) > 0 {
		why = append(why, "removal of "+strings.Join(removed, ", "))
	}
	if len(why) > 0 {
		// Said at the default level: what watch saw is the first thing a
		// user checks when it did not do what they expected.
		w.log().Info("spec files changed", "edited", strings.Join(edited, ", "), "removed", strings.Join(removed, ", "), "specs", len(keys))
	}
	return keys, strings.Join(why, "; ")
}

func (w *Watcher) rel(p string) string {
	if r, err := filepath.Rel(w.root(), p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// crossCheck runs the rules that span files over a set.
func crossCheck(files map[string][]spec.Document) load.Diagnostics {
	var all []spec.Document
	for _, f := range slices.Sorted(maps.Keys(files)) {
		all = append(all, files[f]...)
	}
	return load.CrossCheck(all, true)
}

// newDiags returns the errors of after that were not in before: an edit is
// refused for the problems it brings, not for those already there.
func newDiags(before, after load.Diagnostics) load.Diagnostics {
	had := map[string]int{}
	for _, d := range before {
		had[d.Error()]++
	}
	var out load.Diagnostics
	for _, d := range after {
		if had[d.Error()] > 0 {
			had[d.Error()]--
			continue
		}
		if d.Severity == diag.Error {
			out = append(out, d)
		}
	}
	return out
}

// work is the worker: take every due key, reconcile them as one batch,
// requeue each as its result says.
func (w *Watcher) work(ctx context.Context) {
	q := w.Queue
	for {
		keys, reason, ok := q.GetWithReason(ctx)
		if !ok {
			return
		}
		if reason == "" {
			reason = "queued"
		}
		res := w.Reconcile(ctx, w.Set(), keys, reason)
		w.finish(keys, res)
		q.Done(keys...)
	}
}

// finish requeues each key of a batch as its result says.
func (w *Watcher) finish(keys []string, res map[string]Result) {
	q := w.Queue
	retry := map[string][]string{}
	terminal := map[string][]string{}
	for _, k := range keys {
		r, ok := res[k]
		switch {
		case !ok:
			q.Forget(k)
		case r.Err != nil && IsTerminal(r.Err):
			q.Forget(k)
			terminal[r.Err.Error()] = append(terminal[r.Err.Error()], k)
		case r.Err != nil:
			q.AddRateLimited(k)
			retry[r.Err.Error()] = append(retry[r.Err.Error()], k)
		case r.RequeueAfter > 0:
			q.Forget(k)
			q.AddAfter(k, r.RequeueAfter)
		default:
			q.Forget(k)
		}
	}
	for _, e := range slices.Sorted(maps.Keys(terminal)) {
		ks := terminal[e]
		w.log().Error("reconcile failed; not retried", "error", e, "specs", len(ks), "spec", summary(ks))
	}
	for _, e := range slices.Sorted(maps.Keys(retry)) {
		ks := retry[e]
		w.log().Warn("reconcile failed; retrying with backoff", "error", e, "specs", len(ks), "spec", summary(ks), "retries", q.NumRequeues(ks[0]))
	}
}

// summary names the first few keys.
func summary(ks []string) string {
	if len(ks) > 3 {
		return fmt.Sprintf("%s (+%d more)", strings.Join(ks[:3], ", "), len(ks)-3)
	}
	return strings.Join(ks, ", ")
}

// watchTree scans the tree and makes the watches match it: every
// directory the loader walks, the directory holding each symlink on the way
// to the root or to a spec file, and each symlinked file's real directory.
// A watched path whose target changed (a swapped symlink) is watched again.
// It returns the spec files; it lists again after adding watches, until no
// new directory turns up, so nothing created meanwhile is missed.
func (w *Watcher) watchTree(fw *fsnotify.Watcher) ([]string, error) {
	root := w.root()
	for range 10 {
		sc, err := scanTree(root)
		if err != nil {
			return nil, err
		}
		want := map[string]os.FileInfo{}
		for _, d := range sc.watch {
			if fi, err := os.Stat(d); err == nil {
				want[d] = fi
			}
		}
		listed := map[string]bool{}
		for _, d := range fw.WatchList() {
			listed[d] = true
		}
		added := false
		for _, d := range slices.Sorted(maps.Keys(want)) {
			if old, ok := w.tree.watched[d]; ok && os.SameFile(old, want[d]) && listed[d] {
				continue
			}
			if listed[d] {
				// Its symlink now leads elsewhere: drop the old target's
				// watch before watching the new one under the same path.
				_ = fw.Remove(d)
			}
			if err := fw.Add(d); err != nil {
				delete(want, d)
				if d == root {
					return nil, err
				}
				// Not counted as added: a watch that cannot be added (the
				// inotify limit) is retried at the next rescan, not in a
				// loop here.
				w.log().Error("watch", "dir", d, "error", err)
				continue
			}
			added = true
		}
		for d := range w.tree.watched {
			if _, ok := want[d]; !ok && listed[d] {
				_ = fw.Remove(d)
			}
		}
		w.tree = tree{dirs: map[string]bool{}, files: map[string]bool{}, watched: want, refused: byPath(sc.refused)}
		for _, d := range sc.dirs {
			w.tree.dirs[d] = true
		}
		for _, f := range sc.files {
			w.tree.files[f] = true
		}
		if !added {
			return sc.files, nil
		}
	}
	return slices.Sorted(maps.Keys(w.tree.files)), nil
}

// symlinkParents returns the directory of each symlink on p's path, p
// included: where a swap of that symlink shows up as an event.
func symlinkParents(p string) []string {
	var out []string
	for range 40 { // a bound, as the kernel's on nested symlinks
		p = filepath.Clean(p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		fi, err := os.Lstat(p)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			out = append(out, parent)
			target, err := os.Readlink(p)
			if err != nil {
				break
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(parent, target)
			}
			// The target's own path may hold further symlinks.
			p = target
			continue
		}
		p = parent
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// scan is one listing of the tree.
type scan struct {
	dirs, files []string // as load.Walk lists them (Tree.Dirs, Tree.Files)
	watch       []string // the directories to watch
	// refused is what the walk found and does not read, said as the
	// loader says it.
	refused load.Diagnostics
}

// scanTree is the loader's walk (load.Walk), with the directories to
// watch: those it walks, the directory of every symlink on the way to the
// root or to what it walks (where a swap of that symlink is reported), and
// the real directory of each symlinked spec file (where an edit of its
// target is).
func scanTree(root string) (scan, error) {
	var sc scan
	root = filepath.Clean(root)
	t, err := load.Walk(root)
	if err != nil {
		return sc, err
	}
	watch := map[string]bool{}
	for _, d := range symlinkParents(root) {
		watch[d] = true
	}
	for _, d := range t.Dirs {
		watch[d] = true
	}
	for _, l := range t.Links {
		for _, d := range symlinkParents(l.Path) {
			watch[d] = true
		}
		// A directory also walked is watched under its walked path already
		// (one inode, one watch).
		if !l.Dir && !t.Reals[filepath.Dir(l.Target)] {
			watch[filepath.Dir(l.Target)] = true
		}
	}
	sc.dirs, sc.files, sc.refused = t.Dirs, t.Files, t.Diags
	sc.watch = slices.Sorted(maps.Keys(watch))
	return sc, nil
}

// stampFile digests a file's content (up to limit+1 bytes: past the limit
// the loader refuses it anyway).
func stampFile(p string, limit int64) (stamp, error) {
	// As the loader opens it: a FIFO must not hang the loop.
	f, _, err := confine.OpenRegular(p, false)
	if err != nil {
		return stamp{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, limit+1)); err != nil {
		return stamp{}, err
	}
	return stamp(h.Sum(nil)), nil
}

func (w *Watcher) stamp(p string) (stamp, error) {
	limit := w.Loader.MaxFileSize
	if limit <= 0 {
		limit = 10 << 20
	}
	return stampFile(p, limit)
}

// ticker fires every d on a Clock (never for d <= 0).
type ticker struct {
	clk Clock
	d   time.Duration
	t   Timer
}

func (t *ticker) c() <-chan time.Time {
	if t.d <= 0 {
		return nil
	}
	if t.t == nil {
		t.t = t.clk.NewTimer(t.d)
	}
	return t.t.C()
}

func (t *ticker) rearm() { t.t = t.clk.NewTimer(t.d) }

func (t *ticker) stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

// debouncer fires d (wall time) after the last poke, or 10 × d after the
// first of a steady stream.
type debouncer struct {
	clk   Clock
	d     time.Duration
	first time.Time
	t     Timer
	armed bool
}

func newDebouncer(clk Clock, d time.Duration) *debouncer { return &debouncer{clk: clk, d: max(d, 0)} }

func (b *debouncer) poke() {
	now := b.clk.Now()
	if !b.armed {
		b.first = now
	}
	wait := min(b.d, b.first.Add(10*b.d).Sub(now))
	// A new timer, the old one stopped: its channel is no longer read, so
	// a tick it sent already is dropped with it.
	if b.t != nil {
		b.t.Stop()
	}
	b.t = b.clk.NewTimer(wait)
	b.armed = true
}

func (b *debouncer) c() <-chan time.Time {
	if !b.armed {
		return nil
	}
	return b.t.C()
}

func (b *debouncer) fired() { b.armed = false }

func (b *debouncer) stop() {
	if b.t != nil {
		b.t.Stop()
	}
}

// Subscribe keeps a provider's event stream subscribed until ctx ends:
// events runs the stream, calling send for each world change (send returns
// an error once ctx has ended); whenever it returns, with an error or not,
// Subscribe waits backoff(attempt) and calls it again, after triggering a
// reconcile for the changes missed meanwhile. attempt counts the stream's
// ends since it last delivered an event, from 1. trigger is called with
// each event's reason (e.g. Watcher.Trigger).
func Subscribe(ctx context.Context, name string, events func(ctx context.Context, send func(reason string) error) error, backoff func(attempt int) time.Duration, trigger func(reason string), log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	if backoff == nil {
		backoff = Backoff(time.Second, time.Minute)
	}
	attempt := 0
	for {
		var delivered atomic.Bool
		err := events(ctx, func(reason string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			delivered.Store(true)
			trigger(reason)
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if delivered.Load() {
			attempt = 0
		}
		attempt++
		d := backoff(attempt)
		if err != nil {
			log.Warn("provider events stopped; resubscribing", "provider", name, "error", err, "after", d)
		} else {
			log.Warn("provider events ended; resubscribing", "provider", name, "after", d)
		}
		if d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return
		}
		trigger("resubscribed to " + name + " events")
	}
}

// Backoff returns an exponential backoff for Subscribe: base for attempt 1,
// doubling, capped at max.
func Backoff(base, max time.Duration) func(attempt int) time.Duration {
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		return min(d, max)
	}
}
