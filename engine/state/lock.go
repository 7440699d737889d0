package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Holder says who holds the lock.
type Holder struct {
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Who   string    `json:"who"`
	Since time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("pid %d on %s (%s) since %s", h.PID, h.Host, h.Who, h.Since.Format(time.RFC3339))
}

// LockedError is a lock held by someone else. It wraps ErrLocked.
type LockedError struct {
	Path   string
	Holder *Holder // nil when the holder has not said (yet)
	// Waited is why a waiting Lock gave up (the context's error), nil
	// when it did not wait.
	Waited error
}

func (e *LockedError) Error() string {
	who := "another process"
	if e.Holder != nil {
		who = e.Holder.String()
	}
	if e.Waited != nil {
		return fmt.Sprintf("%s: %v by %s: gave up waiting: %v", e.Path, ErrLocked, who, e.Waited)
	}
	// How to wait is the command's to say: not every command that takes
	// the lock has a flag to wait for it (watch holds it for ever).
	return fmt.Sprintf("%s: %v by %s", e.Path, ErrLocked, who)
}

// IsWatch reports whether the holder is a running setpoint watch, which
// holds the lock for its lifetime and takes a release confirmation handed
// to it (setpoint state confirm-release); no other holder reads one.
func (h *Holder) IsWatch() bool { return h != nil && h.Who == WatchHolder }

// WatchHolder is how setpoint watch names itself in the lock file.
const WatchHolder = "setpoint watch"

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock takes the flock on the sibling lock file (the shards are replaced by
// rename, so they cannot carry it) and writes the holder into it. A lock
// is per call, not per backend: two Locks in one process exclude each
// other too.
func (b *fileBackend) Lock(ctx context.Context, who string, wait bool) (func() error, error) {
	if err := os.MkdirAll(filepath.Dir(b.lock), 0o755); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	// Not through a symlink: the lock file is truncated and rewritten, and a
	// link planted in the state directory must not aim that at a file.
	f, err := os.OpenFile(b.lock, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the state lock: %w", err)
	}
	delay := 5 * time.Millisecond
	for {
		err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking the state %s: %w", b.lock, err)
		}
		held := &LockedError{Path: b.lock, Holder: readHolder(b.lock)}
		if !wait {
			f.Close()
			return nil, held
		}
		if b.onWait != nil {
			b.onWait()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			held.Waited = ctx.Err()
			return nil, held
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
	host, _ := os.Hostname()
	h, _ := json.Marshal(Holder{PID: os.Getpid(), Host: host, Who: who, Since: time.Now().UTC().Truncate(time.Second)})
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(append(h, '\n'), 0)
	}
	b.mu.Lock()
	b.held = f
	b.mu.Unlock()
	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() {
			b.mu.Lock()
			if b.held == f {
				b.held = nil
			}
			b.mu.Unlock()
			_ = f.Truncate(0)
			uerr = flock(f, syscall.LOCK_UN)
			if err := f.Close(); uerr == nil {
				uerr = err
			}
		})
		return uerr
	}, nil
}

// CheckHeld reports whether the lock the last Lock took still excludes
// others: the flock is on an inode, so a lock file removed or replaced
// (rm -rf .setpoint, git clean) lets a second process lock the new one
// while this one believes it holds the state.
func (b *fileBackend) CheckHeld() error {
	b.mu.Lock()
	f := b.held
	b.mu.Unlock()
	if f == nil {
		return fmt.Errorf("the state lock %s is not held", b.lock)
	}
	held, err := f.Stat()
	if err != nil {
		return fmt.Errorf("the state lock %s: %w", b.lock, err)
	}
	now, err := os.Lstat(b.lock)
	if err != nil {
		return fmt.Errorf("the state lock %s was removed while held: another process could take the state", b.lock)
	}
	if !os.SameFile(held, now) {
		return fmt.Errorf("the state lock %s was replaced while held: another process could take the state", b.lock)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// LockHolder says who holds the file state at statePath (nil: nobody has
// said): setpoint state confirm-release names it in what it hands over.
func LockHolder(statePath string) *Holder { return readHolder(statePath + ".lock") }

// readHolder reads the lock file; nil when it says nothing readable (the
// holder may be between taking the lock and writing its name).
func readHolder(path string) *Holder {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	// A holder is one short line; a file of another size is not one.
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}
