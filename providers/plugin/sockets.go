package plugin

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Provider processes listen on Unix sockets. go-plugin makes one directory
// per process under a base directory and removes it when the process is
// stopped, but nothing removes it when setpoint itself is killed. So every
// manager keeps its processes' directories in one run directory of its
// own, holds a lock on it for as long as it lives, and removes it on
// Close; a run directory whose lock can be taken belongs to a setpoint that
// died, and the next manager to start a provider removes it.

// runDirPrefix names run directories in the base directory.
const runDirPrefix = "setpoint-providers-"

// ownerFile is locked (flock) by the live owner of a run directory; the
// kernel drops the lock when the owner dies, however it dies.
const ownerFile = ".owner"

// unlockedGrace protects a run directory created but not yet locked: no
// run directory younger than this is removed.
const unlockedGrace = time.Minute

// runDir returns the manager's run directory, creating and locking it on
// first use (after sweeping the base directory of dead runs' directories).
// Called with m.mu held.
func (m *Manager) runDir() (string, error) {
	if m.run != "" {
		return m.run, nil
	}
	base := m.SocketDir
	if base == "" {
		base = os.TempDir()
	}
	if n := sweepRunDirs(base, time.Now()); n > 0 {
		slog.Debug("removed provider socket directories of runs that died", "count", n, "in", base)
	}
	dir, err := os.MkdirTemp(base, runDirPrefix)
	if err != nil {
		return "", fmt.Errorf("making a directory for provider sockets: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("locking the provider socket directory %s: %w", dir, err)
	}
	m.run, m.owner = dir, f
	return dir, nil
}

// closeRunDir removes the run directory. Called with m.mu held, after the
// processes were stopped.
func (m *Manager) closeRunDir() {
	if m.run == "" {
		return
	}
	if err := os.RemoveAll(m.run); err != nil {
		slog.Warn("removing the provider socket directory", "dir", m.run, "err", err)
	}
	m.owner.Close()
	m.run, m.owner = "", nil
}

// sweepRunDirs removes the run directories under base whose owner is gone
// and returns how many it removed. Only directories named as run
// directories are looked at, and a symlink is never followed.
func sweepRunDirs(base string, now time.Time) int {
	dirs, _ := filepath.Glob(filepath.Join(base, runDirPrefix+"*"))
	n := 0
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
			continue
		}
		if removeIfDead(dir, fi, now) {
			n++
		}
	}
	return n
}

// removeIfDead removes a run directory whose owner is gone. A new run
// makes its directory and then locks it, so a directory younger than
// unlockedGrace is left alone whether locked or not: taking its lock may
// only mean its owner has not yet. The lock taken is held while the
// directory is removed.
func removeIfDead(dir string, fi os.FileInfo, now time.Time) bool {
	if now.Sub(fi.ModTime()) <= unlockedGrace {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, ownerFile), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(dir) == nil
	}
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false // alive
	}
	return os.RemoveAll(dir) == nil
}
