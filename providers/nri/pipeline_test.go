package nri

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
)

func ctrInfo(pod, ns, id string, milli int64, have Owned) CtrInfo {
	ci := CtrInfo{Pod: Pod{ID: pod, Namespace: ns, Name: pod + "-a-b"}, Have: have}
	ci.Ctr.ID, ci.Ctr.Pod, ci.Ctr.Namespace, ci.Ctr.Name, ci.Ctr.CPUMilli = id, pod, ns, "app", milli
	return ci
}

// A crash between sending an update and recording it, or between
// recording and sending: after the restart's Synchronize, what the cache
// says setpoint set is what the runtime has, so nothing is sent twice and
// nothing is lost.
func TestSynchronizeTrustsTheRuntime(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "node.json")
	p, err := NewPipeline(topo8, path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	p.Start(func([]Update) ([]string, error) { return nil, nil })
	if err := p.SetPolicy(ctx, shopPolicy(4, nodepolicy.Enforce)); err != nil {
		t.Fatal(err)
	}
	ups, err := p.Synchronize(ctx, []CtrInfo{ctrInfo("p1", "shop", "s1", 1000, Owned{}), ctrInfo("p2", "web", "w1", 0, Owned{})})
	if err != nil || len(ups) != 2 {
		t.Fatalf("first synchronize: %v %v, want both containers placed", ups, err)
	}
	p.Stop()

	p, err = NewPipeline(topo8, path, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	p.Start(func([]Update) ([]string, error) { return nil, nil })
	defer p.Stop()
	// s1's update never reached the runtime (it has no CPU set); w1's did.
	ups, err = p.Synchronize(ctx, []CtrInfo{
		ctrInfo("p1", "shop", "s1", 1000, Owned{}),
		ctrInfo("p2", "web", "w1", 0, Owned{CPUs: "1-7", Mems: "0-1"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 1 || ups[0].ID != "s1" || ups[0].CPUs != "0" {
		t.Fatalf("after the restart: %+v, want s1's lost update sent again and nothing for w1", ups)
	}
}

// A cache file that is not one refuses to start rather than guessing.
func TestCacheRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.json")
	for _, bad := range []string{"{", `{"version": 99}`, `{"version": 1, "policy": {"config": {"policy": {"cpus": "always", "memory": "observe"}}}}`} {
		if err := saveCache(path, []byte(bad)); err != nil {
			t.Fatal(err)
		}
		if _, err := NewPipeline(topo8, path, slog.Default()); err == nil {
			t.Errorf("%s: loaded", bad)
		}
	}
}
