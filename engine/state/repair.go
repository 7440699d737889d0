package state

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/internal/atomicfile"
)

// Repairer is what `setpoint state` needs of a backend beyond Backend:
// Load never resets a shard it cannot read, so a person decides, shard by
// shard, whether to re-seal it (an edit by hand whose checksum no longer
// matches) or to move it aside (its object is then adopted again from the
// world, as if new). The caller holds the lock.
type Repairer interface {
	// Shards lists the storage names of every shard.
	Shards() ([]string, error)
	// Reseal rewrites a shard's checksum over its attributes as they are
	// now, after checking they parse and the shard names its own object.
	Reseal(ctx context.Context, name string) error
	// Quarantine moves a shard aside (to a name Load ignores) and returns
	// where it went.
	Quarantine(ctx context.Context, name string, now time.Time) (string, error)
}

var _ Repairer = (*fileBackend)(nil)

// shardPath checks that name is a shard file's bare name and returns its
// path: a name from the command line must not reach outside the state
// directory.
func (b *fileBackend) shardPath(name string) (string, error) {
	name = filepath.Base(name)
	if name == "." || name == ".." || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("%q is not a state shard's name (a .json file in %s)", name, b.dir)
	}
	return filepath.Join(b.dir, name), nil
}

func (b *fileBackend) Shards() ([]string, error) {
	ents, err := os.ReadDir(b.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", b.dir, err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasSuffix(n, ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out, nil
}

func (b *fileBackend) Reseal(_ context.Context, name string) error {
	path, err := b.shardPath(name)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxShard {
		return fmt.Errorf("%s is not a regular file of at most %d bytes", path, MaxShard)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f shardFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%s does not parse, so it cannot be re-sealed (move it aside with reset): %v", path, err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, f.Attrs); err != nil {
		return fmt.Errorf("%s: attrs do not parse: %v", path, err)
	}
	f.Attrs = json.RawMessage(c.Bytes())
	sum := sha256.Sum256(f.Attrs)
	f.Checksum = hex.EncodeToString(sum[:])
	f.Version = Version
	// The resealed shard must then load: same checks as Load.
	if l, ok := b.decode(filepath.Base(path), f, false, nil); !ok {
		return fmt.Errorf("not re-sealed: %w", l.err)
	}
	out, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, out, 0o600)
}

func (b *fileBackend) Quarantine(_ context.Context, name string, now time.Time) (string, error) {
	path, err := b.shardPath(name)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(path); err != nil {
		return "", err
	}
	// A hidden name: Load and Shards skip it, and it stays for a person
	// to read.
	to := filepath.Join(b.dir, fmt.Sprintf(".%s.aside-%s", filepath.Base(path), now.UTC().Format("20060102T150405Z")))
	if err := os.Rename(path, to); err != nil {
		return "", err
	}
	return to, atomicfile.SyncDir(b.dir)
}
