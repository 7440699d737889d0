package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/values"
)

// TestRepair: a shard edited by hand fails its checksum until re-sealed,
// and then loads with the edit; a shard that does not parse cannot be
// re-sealed and is moved aside instead, after which the rest loads; no
// name reaches outside the state directory.
func TestRepair(t *testing.T) {
	ctx := context.Background()
	b := newBackend(t)
	s := New()
	s.Entry(at(checkout, "spec.replicas")).User = ptr(values.CountOf(3))
	s.Entry(at(fib, "spec.replicas")).User = ptr(values.CountOf(1))
	save(t, b, s)
	names, err := b.Shards()
	if err != nil || len(names) != 2 {
		t.Fatalf("shards: %v %v", names, err)
	}
	co, fb := shardName(checkout), shardName(fib)

	// Edited by hand: 3 → 7.
	p := filepath.Join(b.dir, co)
	data, _ := os.ReadFile(p)
	edited := strings.Replace(string(data), `"value":"3"`, `"value":"7"`, 1)
	if edited == string(data) {
		t.Fatalf("no value to edit in %s", data)
	}
	if err := os.WriteFile(p, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an edited shard must fail its checksum: %v", err)
	}
	if err := b.Reseal(ctx, co); err != nil {
		t.Fatal(err)
	}
	got := load(t, b)
	if e, _ := got.Lookup(at(checkout, "spec.replicas")); e == nil || *e.User != values.CountOf(7) {
		t.Fatalf("after re-sealing: %+v", e)
	}

	// Garbage: not re-sealable; moved aside, the rest loads.
	if err := os.WriteFile(filepath.Join(b.dir, fb), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reseal(ctx, fb); err == nil {
		t.Fatal("a shard that does not parse cannot be re-sealed")
	}
	// A shard that parses but holds another object's attributes: the
	// checks of Load still apply.
	other, _ := os.ReadFile(filepath.Join(b.dir, co))
	if err := os.WriteFile(filepath.Join(b.dir, fb), other, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Reseal(ctx, fb); err == nil || !strings.Contains(err.Error(), "holds the shard of") {
		t.Fatalf("re-sealing a shard under another object's name: %v", err)
	}
	to, err := b.Quarantine(ctx, fb, time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	if err != nil || filepath.Dir(to) != b.dir || !strings.HasPrefix(filepath.Base(to), ".") {
		t.Fatalf("quarantine: %q %v", to, err)
	}
	got = load(t, b)
	if len(got.Objects()) != 1 {
		t.Fatalf("after moving one aside: %v", got.Objects())
	}
	for _, bad := range []string{"../state.json.lock", "..", ".x.json", "x.txt"} {
		if _, err := b.Quarantine(ctx, bad, time.Now()); err == nil || !strings.Contains(err.Error(), "not a state shard") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	// A name that climbs out: only its base name inside the state
	// directory is looked at, and the file outside is untouched.
	victim := filepath.Join(filepath.Dir(b.dir), "victim.json")
	if err := os.WriteFile(victim, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Quarantine(ctx, "../victim.json", time.Now()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("quarantine of ../victim.json: %v", err)
	}
	if err := b.Reseal(ctx, "../victim.json"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reseal of ../victim.json: %v", err)
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "{not json" {
		t.Fatalf("the file outside was touched: %q %v", data, err)
	}
}

// TestOversizedShardIsRefusedUnread: a shard bigger than MaxShard (here a
// sparse file) is an unreadable shard, not a read of all of it.
func TestOversizedShardIsRefusedUnread(t *testing.T) {
	b := newBackend(t)
	s := New()
	s.Entry(at(checkout, "spec.replicas")).User = ptr(values.CountOf(3))
	save(t, b, s)
	if err := os.Truncate(filepath.Join(b.dir, shardName(checkout)), 1<<40); err != nil {
		t.Fatal(err)
	}
	_, err := b.Load(context.Background())
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file of at most") {
		t.Fatalf("want the oversized shard refused: %v", err)
	}
}
