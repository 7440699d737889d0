// Package state keeps what setpoint must remember between runs: for each
// attribute it acts on, the user's value at adoption, what it applied and
// when, and the recommendations of the open stability window. The local
// backend is one JSON file written atomically (temp file + rename), guarded
// by flock so two applies never race, and checksummed so corruption is
// reported, never silently reset.
package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Version of the file format.
const Version = 1

// MaxHistory bounds the recommendations kept per attribute.
const MaxHistory = 32

// State is every attribute's entry, keyed by Key(address, attribute).
type State struct {
	Entries map[string]*Entry `json:"entries"`
}

// Key names an attribute of an object: "sim:Deployment/shop/checkout spec.replicas".
func Key(address, attribute string) string { return address + " " + attribute }

// Entry is what is remembered of one attribute.
type Entry struct {
	// User is the value the attribute had when setpoint first saw it.
	User *int64 `json:"user,omitempty"`
	// Applied is setpoint's last write.
	Applied *Applied `json:"applied,omitempty"`
	// Window is the open stability window.
	Window *Window `json:"window,omitempty"`
	// History is the latest recommendations, oldest first.
	History []Rec `json:"history,omitempty"`
}

// Applied records a write.
type Applied struct {
	Value int64     `json:"value"`
	At    time.Time `json:"at"`
}

// Window is a stability window: opened by Anchor at OpenedAt.
type Window struct {
	OpenedAt time.Time `json:"openedAt"`
	Anchor   int64     `json:"anchor"`
}

// Rec is one recommendation.
type Rec struct {
	At    time.Time `json:"at"`
	Value int64     `json:"value"`
}

// New returns an empty state.
func New() *State { return &State{Entries: map[string]*Entry{}} }

// Get returns the entry for key, creating it.
func (s *State) Get(key string) *Entry {
	e, ok := s.Entries[key]
	if !ok {
		e = &Entry{}
		s.Entries[key] = e
	}
	return e
}

// Record appends a recommendation, keeping the newest MaxHistory.
func (e *Entry) Record(at time.Time, v int64) {
	e.History = append(e.History, Rec{At: at, Value: v})
	if n := len(e.History); n > MaxHistory {
		e.History = append(e.History[:0], e.History[n-MaxHistory:]...)
	}
}

type file struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Entries  json.RawMessage `json:"entries"`
}

// ErrCorrupt marks a state file that fails its checksum or does not parse.
var ErrCorrupt = errors.New("state file is corrupt")

// Load reads the state at path; a missing file is an empty state.
func Load(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", path, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w: %v; it was left as it is: repair it or move it aside", path, ErrCorrupt, err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%s: state version %d, this release reads %d", path, f.Version, Version)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, f.Entries); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if sum := checksum(compact.Bytes()); sum != f.Checksum {
		return nil, fmt.Errorf("%s: %w: checksum %s, content hashes to %s; it was left as it is: repair it or move it aside", path, ErrCorrupt, short(f.Checksum), short(sum))
	}
	s := New()
	if err := json.Unmarshal(f.Entries, &s.Entries); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	if s.Entries == nil {
		s.Entries = map[string]*Entry{}
	}
	return s, nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Save writes the state atomically: a crash leaves the old file or the new
// one, never a mix.
func Save(path string, s *State) error {
	entries, err := json.Marshal(s.Entries) // map keys are sorted: stable bytes
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(file{Version: Version, Checksum: checksum(entries), Entries: entries}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable
		d.Close()
	}
	return nil
}

// Lock is an exclusive lock on a state file, held through a sibling
// ".lock" file (the state itself is replaced by rename on every save).
type Lock struct {
	f *os.File
}

// ErrLocked is returned when another process holds the lock.
var ErrLocked = errors.New("state is locked")

// Acquire takes the lock for path. With wait it retries until ctx ends;
// without, it fails at once naming the holder.
func Acquire(ctx context.Context, path, who string, wait bool) (*Lock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening state lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking state: %w", err)
		}
		holder := readHolder(path + ".lock")
		if !wait {
			f.Close()
			return nil, fmt.Errorf("%w by %s; wait for it, or run again with --lock-timeout", ErrLocked, holder)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w by %s: gave up waiting: %v", ErrLocked, holder, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	host, _ := os.Hostname()
	info := fmt.Sprintf("pid %d on %s (%s) since %s", os.Getpid(), host, who, time.Now().UTC().Format(time.RFC3339))
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(info), 0)
	return &Lock{f: f}, nil
}

func readHolder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return "another process"
	}
	return strings.TrimSpace(string(b))
}

// Release gives the lock up.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
	return err
}
