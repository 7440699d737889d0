package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".setpoint", "state.json")
	s, err := Load(path)
	if err != nil || len(s.Entries) != 0 {
		t.Fatalf("a missing file is an empty state: %v %v", s, err)
	}
	u := int64(2)
	e := s.Get(Key("sim:Deployment/shop/checkout", "spec.replicas"))
	e.User = &u
	e.Applied = &Applied{Value: 3, At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 0; i < 40; i++ {
		e.Record(time.Unix(int64(i), 0).UTC(), int64(i))
	}
	if len(e.History) != MaxHistory || e.History[0].Value != 40-MaxHistory {
		t.Fatalf("history kept %d from %d", len(e.History), e.History[0].Value)
	}
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := back.Entries[Key("sim:Deployment/shop/checkout", "spec.replicas")]
	if got == nil || *got.User != 2 || got.Applied.Value != 3 || len(got.History) != MaxHistory {
		t.Fatalf("round trip: %+v", got)
	}
	// No temp files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestCorruptionIsReportedNotReset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := New()
	s.Get("a x").Applied = &Applied{Value: 5}
	if err := Save(path, s); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	tampered := strings.Replace(string(b), `"value": 5`, `"value": 6`, 1)
	if tampered == string(b) {
		// The entries are stored compact inside the indented file.
		tampered = strings.Replace(string(b), `"value":5`, `"value":6`, 1)
	}
	if err := os.WriteFile(path, []byte(tampered), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("tampered state: %v", err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != "{not json" {
		t.Fatal("a corrupt file must be left as it is")
	}
}

func TestLockExcludesAndNamesHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l1, err := Acquire(context.Background(), path, "setpoint apply", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(context.Background(), path, "setpoint apply", false)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "(setpoint apply)") || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lock: %v", err)
	}
	// A waiter gets it once the holder lets go.
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l2, err := Acquire(ctx, path, "setpoint watch", true)
		if err == nil {
			err = l2.Release()
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	// A waiter that runs out of time says who held it.
	l3, _ := Acquire(context.Background(), path, "holder", false)
	defer l3.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer cancel()
	if _, err := Acquire(ctx, path, "late", true); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "gave up waiting") {
		t.Fatalf("timeout: %v", err)
	}
}
