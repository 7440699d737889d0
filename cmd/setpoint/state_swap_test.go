package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// gitSyncRoot lays out a git-sync root holding the shipped specs in a
// worktree: base/current -> .worktrees/a. It returns base.
func gitSyncRoot(t *testing.T, edits ...[3]string) string {
	t.Helper()
	base := t.TempDir()
	specVersion(t, filepath.Join(base, ".worktrees", "a"), "400", edits...)
	swapIn(t, base, "current", ".worktrees/a")
	return base
}

// appliedIn lists what the state of dir says setpoint applied, as
// "address attribute" (setpoint state show).
func appliedIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out, err := exec.Command(binary, "state", "show", "--json", dir).Output()
	if err != nil {
		t.Fatalf("state show %s: %v\n%s", dir, err, out)
	}
	var objs []struct {
		Address    string `json:"address"`
		Attributes []struct {
			Path    string `json:"path"`
			Applied string `json:"applied"`
		} `json:"attributes"`
	}
	if err := json.Unmarshal(out, &objs); err != nil {
		t.Fatalf("state show %s: %v\n%s", dir, err, out)
	}
	set := map[string]bool{}
	for _, o := range objs {
		for _, a := range o.Attributes {
			if a.Applied != "" {
				set[o.Address+" "+a.Path] = true
			}
		}
	}
	return set
}

// stillHolds fails unless after holds everything before did.
func stillHolds(t *testing.T, before, after map[string]bool) {
	t.Helper()
	if len(before) == 0 {
		t.Fatal("nothing was applied before the swap: the test proves nothing")
	}
	for k := range before {
		if !after[k] {
			t.Errorf("after the swap the state no longer holds %s (it holds %d entries, %d before)", k, len(after), len(before))
		}
	}
}

// TestStateSurvivesGitSyncSwaps: with the spec directory a git-sync link,
// the file state lives beside the link, not in the worktree the next swap
// deletes: a watch keeps reconciling across a swap, and a one-shot apply's
// record is still there for the plan after it.
func TestStateSurvivesGitSyncSwaps(t *testing.T) {
	t.Run("watch", func(t *testing.T) {
		base := gitSyncRoot(t)
		dir := filepath.Join(base, "current")
		w := startProc(t, "watch", "--health-addr", "127.0.0.1:0", dir)
		addr := w.addr(t, "serving health")
		reconciles := func() (ok, failed float64) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				return -1, -1
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			ok, _ = metricValue(string(b), `setpoint_reconciles_total{result="ok"}`)
			failed, _ = metricValue(string(b), `setpoint_reconciles_total{result="failed"}`)
			return ok, failed
		}
		testutil.Eventually(t, 30*time.Second, "the start's reconcile applied", func() bool {
			ok, _ := reconciles()
			return ok >= 1 && strings.Contains(w.logs.String(), "msg=applied")
		})
		before := appliedIn(t, dir)

		specVersion(t, filepath.Join(base, ".worktrees", "b"), "400")
		swapIn(t, base, "current", ".worktrees/b")
		ok0, failed0 := reconciles()
		// The reconciles run one at a time: the second to end after the
		// swap began after it.
		testutil.Eventually(t, 30*time.Second, "two reconciles after the swap", func() bool {
			ok, failed := reconciles()
			return ok+failed >= ok0+failed0+2
		})
		if _, failed := reconciles(); failed != failed0 || strings.Contains(w.logs.String(), "removed while held") {
			t.Fatalf("reconciles failed after the swap (%v failed, %v before):\n%s", failed, failed0, w.logs.String())
		}
		stillHolds(t, before, appliedIn(t, dir))
		w.stop(t, 10*time.Second)
	})
	t.Run("one-shot", func(t *testing.T) {
		base := gitSyncRoot(t)
		dir := filepath.Join(base, "current")
		if out, err := exec.Command(binary, "apply", "--auto-approve", dir).CombinedOutput(); err != nil {
			t.Fatalf("apply: %v\n%s", err, out)
		}
		before := appliedIn(t, dir)
		specVersion(t, filepath.Join(base, ".worktrees", "b"), "400")
		swapIn(t, base, "current", ".worktrees/b")
		if out, err := exec.Command(binary, "plan", dir).CombinedOutput(); err != nil {
			t.Fatalf("plan after the swap: %v\n%s", err, out)
		}
		stillHolds(t, before, appliedIn(t, dir))
		if _, err := os.Stat(filepath.Join(base, ".setpoint", "state.json.d")); err != nil {
			t.Errorf("the state is not beside the link: %v", err)
		}
	})
}

// TestStateInsideTheSwappedTreeIsRefused: a state.path that lies inside
// the worktree a git-sync link leads to (not under .setpoint/, which is
// kept beside the link) would be deleted by the next swap: refused, naming
// the link. The same path in a directory that is no link is fine.
func TestStateInsideTheSwappedTreeIsRefused(t *testing.T) {
	edit := [3]string{"setpoint.yaml", "path: .setpoint/state.json", "path: state/state.json"}
	base := gitSyncRoot(t, edit)
	link := filepath.Join(base, "current")
	for _, cmd := range [][]string{{"plan", link}, {"validate", link}, {"state", "show", link}} {
		out, err := exec.Command(binary, cmd...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), `spec.state.path: state.path "state/state.json" resolves to`) ||
			!strings.Contains(string(out), "the symlink "+`"`+link+`"`) || !strings.Contains(string(out), "the next swap of the link deletes it") {
			t.Fatalf("%s: %v, want the state path refused naming the link %q:\n%s", cmd[0], err, link, out)
		}
	}
	if _, err := os.Stat(filepath.Join(base, ".worktrees", "a", "state")); err == nil {
		t.Error("a state was written inside the worktree")
	}
	if out, err := exec.Command(binary, "plan", copySpecs(t, edit)).CombinedOutput(); err != nil {
		t.Fatalf("the same state.path in a directory that is no link: %v\n%s", err, out)
	}
}
