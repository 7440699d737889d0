package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// swapIn publishes dir as the new target of link (in parent) the way the
// kubelet's atomic writer and git-sync do: a symlink made beside the live
// one and renamed over it, then the old target deleted.
func swapIn(t *testing.T, parent, link, target string) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(parent, link))
	tmp := filepath.Join(parent, link+".tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(parent, link)); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(parent, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// specVersion copies the shipped specs into dir with checkout's minRPS set.
func specVersion(t *testing.T, dir string, minRPS string, extra ...[3]string) {
	t.Helper()
	src := copySpecs(t, append([][3]string{{"checkout.nfr.yaml", "minRPS: 400", "minRPS: " + minRPS}}, extra...)...)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(src, dir); err != nil {
		t.Fatal(err)
	}
}

// TestWatchSeesSymlinkSwaps runs the real binary with the tick's rescan off
// on both shipped layouts: git-sync's (the spec root is itself a symlink,
// current -> .worktrees/HASH) and a ConfigMap volume's (each file a symlink
// through ..data). Three versions are published in a row, each deleting
// the old target; each one's change is applied.
func TestWatchSeesSymlinkSwaps(t *testing.T) {
	versions := []string{"400", "900", "1500"}
	const applied = `reason="edit of checkout.nfr.yaml" address=sim:HorizontalPodAutoscaler/shop/checkout attribute=spec.minReplicas`
	quickly := [][3]string{{"checkout.nfr.yaml", "stability: 3m", "stability: 0s"}, {"checkout.nfr.yaml", "cooldown: 2m", "cooldown: 0s"}}
	t.Run("git-sync", func(t *testing.T) {
		base := t.TempDir()
		state := filepath.Join(base, "state", "state.json")
		setState := [3]string{"setpoint.yaml", "path: .setpoint/state.json", "path: " + state}
		specVersion(t, filepath.Join(base, ".worktrees", "v0"), versions[0], append(quickly, setState)...)
		swapIn(t, base, "current", ".worktrees/v0")
		w := startProc(t, "watch", "--allow-outside-paths", "--no-tick-rescan", filepath.Join(base, "current"))
		w.waitLog(t, 20*time.Second, "msg=watching")
		w.waitLog(t, 20*time.Second, "reason=start")
		for i := 1; i < len(versions); i++ {
			n := strings.Count(w.logs.String(), applied)
			v := filepath.Join(".worktrees", "v"+versions[i])
			specVersion(t, filepath.Join(base, v), versions[i], append(quickly, setState)...)
			swapIn(t, base, "current", v)
			w.waitLog(t, 20*time.Second, "spec files changed")
			waitCount(t, w, applied, n+1)
		}
		w.stop(t, 5*time.Second)
	})
	t.Run("configmap", func(t *testing.T) {
		root := t.TempDir()
		specVersion(t, filepath.Join(root, "..v0"), versions[0], quickly...)
		swapIn(t, root, "..data", "..v0")
		// Each entry of the volume's root is a symlink through ..data.
		ents, err := os.ReadDir(filepath.Join(root, "..v0"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if err := os.Symlink(filepath.Join("..data", e.Name()), filepath.Join(root, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		// The state is the directory's own (a real directory beside the
		// volume's entries), as an emptyDir mounted over it would be.
		w := startProc(t, "watch", "--no-tick-rescan", root)
		w.waitLog(t, 20*time.Second, "msg=watching")
		w.waitLog(t, 20*time.Second, "reason=start")
		for i := 1; i < len(versions); i++ {
			n := strings.Count(w.logs.String(), applied)
			specVersion(t, filepath.Join(root, "..v"+versions[i]), versions[i], quickly...)
			swapIn(t, root, "..data", "..v"+versions[i])
			waitCount(t, w, applied, n+1)
		}
		w.stop(t, 5*time.Second)
	})
}

// waitCount waits until what appears n times in the logs.
func waitCount(t *testing.T, p *proc, what string, n int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%q %d times", what, n), func() bool { return strings.Count(p.logs.String(), what) >= n })
}
