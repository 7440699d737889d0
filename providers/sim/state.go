package sim

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

// Several provider processes may serve one sim world: each setpoint run
// (apply, plan, watch) starts its own, and each replays the sim state file
// into a world of its own. The file is the world's truth; every process
// catches up with it before each request, and writes it only under its
// lock, having caught up first.

// fileSeen is the state file as a provider last read or wrote it: the
// stamp that says cheaply whether it may have changed, and the hash of
// its content.
type fileSeen struct {
	exists   bool
	dev, ino uint64
	size     int64
	mtime    time.Time
	// checked is when the content was last read (or written) and found to
	// hash to sum while the file had this stamp.
	checked time.Time
	sum     [sha256.Size]byte
}

// stampSettle is how long after its modification time a stamp alone is
// trusted. A write within the file system's timestamp granularity of the
// last read, to a file that reuses the old inode number and has the old
// size, would keep the stamp; once the read came well after the
// modification time, any later write shows in the stamp.
const stampSettle = time.Second

func stampOf(fi fs.FileInfo) fileSeen {
	s := fileSeen{exists: true, size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), st.Ino
	}
	return s
}

// sameStamp reports whether two looks at the file agree on its stamp.
func (s fileSeen) sameStamp(o fileSeen) bool {
	return s.exists == o.exists && s.dev == o.dev && s.ino == o.ino && s.size == o.size && s.mtime.Equal(o.mtime)
}

// settled reports whether the stamp alone says the file is as seen.
func (s fileSeen) settled() bool { return s.checked.Sub(s.mtime) > stampSettle }

// readState reads the state file's changes with the stamp and hash of
// what was read; a missing file is no changes.
func readState(path string) ([]Change, fileSeen, error) {
	b, seen, err := readStateBytes(path)
	if err != nil || !seen.exists {
		return nil, seen, err
	}
	changes, err := parseChanges(path, b)
	return changes, seen, err
}

// readStateBytes reads the file and its stamp from one open file, so the
// two agree.
func readStateBytes(path string) ([]byte, fileSeen, error) {
	now := time.Now()
	// Not blocking: a FIFO planted at the path must not hang the provider.
	b, fi, err := confine.ReadRegular(path, MaxStateFile, false)
	var nr *confine.NotRegularError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fileSeen{checked: now}, nil
	case errors.As(err, &nr):
		return nil, fileSeen{}, fmt.Errorf("sim state %s is not a regular file (%s)", path, confine.Kind(nr.Mode))
	case errors.Is(err, confine.ErrTooLarge) && fi != nil && fi.Size() > MaxStateFile:
		return nil, fileSeen{}, fmt.Errorf("sim state %s is %d bytes, more than the %d it may be; delete it and the world starts again from its config", path, fi.Size(), MaxStateFile)
	case errors.Is(err, confine.ErrTooLarge):
		return nil, fileSeen{}, fmt.Errorf("sim state %s grew past %d bytes while being read", path, MaxStateFile)
	case err != nil:
		return nil, fileSeen{}, fmt.Errorf("reading sim state %s: %w", path, err)
	}
	seen := stampOf(fi)
	seen.checked, seen.sum = now, sha256.Sum256(b)
	return b, seen, nil
}

// refresh catches the world up with the state file when another process
// changed it since this one last read or wrote it. force reads the file
// even when its stamp says it is unchanged, as Apply does under the lock
// before it writes. A file that cannot be read or is corrupt leaves the
// world as it was and is an error.
func (p *Provider) refresh(force bool) error {
	if p.StatePath == "" {
		return nil
	}
	if !force {
		fi, err := os.Stat(p.StatePath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if !p.seen.exists {
				return nil
			}
		case err != nil:
			return fmt.Errorf("reading sim state: %w", err)
		default:
			if p.seen.exists && stampOf(fi).sameStamp(p.seen) && p.seen.settled() {
				return nil
			}
		}
	}
	b, seen, err := readStateBytes(p.StatePath)
	if err != nil {
		return err
	}
	if seen.exists == p.seen.exists && seen.sum == p.seen.sum {
		p.seen = seen
		return nil
	}
	var changes []Change
	if seen.exists {
		if changes, err = parseChanges(p.StatePath, b); err != nil {
			return err
		}
	}
	w, err := p.World.catchUp(changes)
	if err != nil {
		return fmt.Errorf("sim state %s: %w", p.StatePath, err)
	}
	p.World, p.seen = w, seen
	return nil
}

// save writes the world's changes to the state file (under its lock) and
// remembers what it wrote.
func (p *Provider) save() error {
	b, err := encodeChanges(p.World.changes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.StatePath), 0o755); err != nil {
		return fmt.Errorf("writing sim state: %w", err)
	}
	if err := writeState(p.StatePath, b, 0o644); err != nil {
		return err
	}
	fi, err := os.Stat(p.StatePath)
	if err != nil {
		return fmt.Errorf("writing sim state: %w", err)
	}
	seen := stampOf(fi)
	seen.checked, seen.sum = time.Now(), sha256.Sum256(b)
	p.seen = seen
	return nil
}

// writeState writes the state file atomically (a variable: tests make a
// save fail).
var writeState = atomicfile.Write

// onLockWait, when set (by tests), is called once when Apply finds the
// state lock held and starts waiting for it.
var onLockWait func()

// lockState takes the exclusive lock of the state file at path: an flock
// on a sidecar file (path + ".lock"), so the state file itself can be
// replaced by a rename while it is held. The kernel releases it when the
// process dies. It waits as long as ctx allows.
func lockState(ctx context.Context, path string) (unlock func(), err error) {
	name := lockPath(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("taking the sim state lock: %w", err)
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("taking the sim state lock: %w", err)
	}
	hook := onLockWait
	delay := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("taking the sim state lock %s: %w", name, err)
		}
		if hook != nil {
			hook()
			hook = nil
		}
		// Polled, so a cancelled request stops waiting: a blocking flock
		// cannot be interrupted.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, fmt.Errorf("waiting for the sim state lock %s: %w", name, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// catchUp returns the world with changes instead of its own. When its own
// changes up to now are where changes start, and the rest are due now or
// later, this world is the world of changes so far: it takes the rest
// and goes on. Otherwise it is rebuilt: replayed from the trace's start
// with changes, to the same second.
func (w *World) catchUp(changes []Change) (*World, error) {
	n := w.applied
	if len(changes) >= n && (len(changes) == n || changes[n].At >= w.sec) && changesEqual(changes[:n], w.changes[:n]) {
		if err := w.checkEnd(changes); err != nil {
			return nil, err
		}
		w.changes = changes
		w.applyDue(w.sec)
		return w, nil
	}
	return w.rebuilt(changes)
}

func changesEqual(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].equal(b[i]) {
			return false
		}
	}
	return true
}

// rebuilt replays the world's config and trace with changes up to the
// world's second. The samples it would write up to then were written
// already (from the old timeline), so they are muted; the series of pods
// the old world had and the new one does not get staleness markers at the
// next scrape, as a Prometheus would write for a pod that went away.
func (w *World) rebuilt(changes []Change) (*World, error) {
	o := Options{Changes: changes, Traces: w.traces, NoReport: w.noReport}
	if w.sink != nil {
		o.Sink = &muted{sink: w.sink, until: w.Now().UnixMilli()}
	}
	nw, err := NewWithTrace(w.base, w.trace, o)
	if err != nil {
		return nil, err
	}
	nw.AdvanceTo(w.Now())
	nw.sink = w.sink
	for i, old := range w.wls {
		nwl := nw.wls[i]
		live := make(map[string]bool, len(nwl.pods))
		for _, p := range nwl.pods {
			live[p.name] = true
		}
		for _, p := range append(old.gone, old.pods...) {
			if p.series != nil && !live[p.name] {
				nwl.gone = append(nwl.gone, p)
			}
		}
	}
	return nw, nil
}

// muted drops samples up to until (ms) and passes on the rest.
type muted struct {
	sink  Sink
	until int64
}

func (m *muted) AppendCached(l labels.Labels, cache *any, t int64, v float64) error {
	if t <= m.until {
		return nil
	}
	return m.sink.AppendCached(l, cache, t, v)
}

// MaxStateFile bounds the sim state file read back: some 300,000 applied
// changes, far more than a sim run makes, and every one is replayed when
// the world is rebuilt.
const MaxStateFile = 64 << 20

// lockPath is the sidecar file a sim state file is locked through.
func lockPath(statePath string) string { return statePath + ".lock" }
