package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/internal/simtable"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
)

var update = flag.Bool("update", false, "rewrite golden files")

// copySpecs copies specs/ (with its trace) into a temp directory and
// applies edits (file → old → new).
func copySpecs(t testing.TB, edits ...[3]string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "specs")
	err := filepath.WalkDir("../../specs", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("../../specs", p)
		if strings.HasPrefix(rel, ".setpoint") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	// These tests drive the loop's mechanics (windows, cooldowns,
	// requeues, saved plans) through checkout's increase: they want it to
	// wait for its window, as an increase under scaleUp: stable does, and
	// they were written for the safety below and a checkout that owns only
	// its HPA's floor (the shipped one also owns its target and window,
	// with the defaults make bench-control chose: the mechanics are the
	// same, the numbers are not).
	for _, e := range append([][3]string{mechanicsSafety, ownsFloor, stableUp}, edits...) {
		p := filepath.Join(dst, e[0])
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), e[1]) {
			t.Fatalf("%s does not contain %q", e[0], e[1])
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), e[1], e[2], 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// Edits that let one-shot runs apply at once: the sim world is frozen at
// its start time, so a stability window would never fill.
// stableUp makes checkout's increases wait like its decreases.
var stableUp = [3]string{"checkout.nfr.yaml", "safety: {", "safety: {scaleUp: stable, "}

// mechanicsSafety and ownsFloor give the copied checkout the safety and
// ownership the loop's tests were written for.
var (
	mechanicsSafety = [3]string{"checkout.nfr.yaml", "safety: {maxReplicas: 50}",
		"safety: {stability: 3m, tolerance: 10%, cooldown: 2m, maxReplicaStep: 30%, maxReplicaStepUp: 30%, minReplicaStepUp: 1, stepPeriod: 0s, maxReplicas: 50}"}
	ownsFloor = [3]string{"checkout.nfr.yaml", "  autoscaler: {owns: count}\n", ""}
)

var quick = [][3]string{
	{"checkout.nfr.yaml", "stability: 3m", "stability: 0s"},
	{"inventory.nfr.yaml", "memory: enforce", "memory: enforce\n  safety: {stability: 0s}"},
}

// changesDigest hashes the changes with their spec positions, which name
// the temporary directory.
var changesDigest = regexp.MustCompile(`"changesDigest": "[0-9a-f]{64}"`)

func normalize(s, dir string) string {
	s = changesDigest.ReplaceAllString(s, `"changesDigest": "DIGEST"`)
	return strings.ReplaceAll(s, dir, "DIR")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("../../testdata/golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s differs (run with -update after checking):\n--- want\n%s\n--- got\n%s", name, want, got)
	}
}

func TestPlanGolden(t *testing.T) {
	dir := copySpecs(t)
	out, errOut, code := runCLI(t, "plan", "--detailed-exitcode", dir)
	// fib's increase goes through at once (scaleUp: immediate, the
	// default); everything else is held (checkout's increase waits under
	// scaleUp: stable, memory by stability or observe mode): exit 2.
	if code != 2 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "plan.txt", normalize(out, dir))
	out, _, code = runCLI(t, "plan", "--json", dir)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan.json", normalize(out, dir))
}

func TestPlanApplyStaleAndLocks(t *testing.T) {
	dir := copySpecs(t, quick...)
	out, _, code := runCLI(t, "plan", "--detailed-exitcode", "--out", filepath.Join(dir, "p1.json"), dir)
	if code != 2 || !strings.Contains(out, "~ sim:HorizontalPodAutoscaler/shop/checkout\n    spec.minReplicas: 2 → 3") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	// Without a terminal, apply DIR refuses rather than guess.
	_, errOut, code := runCLI(t, "apply", dir)
	if code != 1 || !strings.Contains(errOut, "no terminal to confirm") {
		t.Fatalf("unconfirmed apply: %d %s", code, errOut)
	}
	// Someone holds the state: a second apply fails at once and names them.
	statePath := filepath.Join(dir, ".setpoint", "state.json")
	backend := state.NewFile(statePath)
	unlock, err := backend.Lock(context.Background(), "the test", false)
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "apply", "--auto-approve", dir)
	if code != 1 || !strings.Contains(errOut, "state is locked by pid") || !strings.Contains(errOut, "(the test)") {
		t.Fatalf("locked: %d %s", code, errOut)
	}
	// With a lock timeout it waits for the holder: it says it is waiting,
	// and finishes only after the holder lets go.
	cmd := exec.Command(binary, "apply", "--auto-approve", "--lock-timeout", "30s", dir)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if !startUntilLogged(t, cmd, "waiting for the state lock", "the test") {
		t.Fatalf("apply --lock-timeout never said it was waiting for the lock")
	}
	unlock()
	if err := cmd.Wait(); err != nil || !strings.Contains(stdout.String(), "Apply complete: 8 applied, 0 failed") {
		t.Fatalf("apply after the wait: %v\n%s", err, stdout.String())
	}
	// The world moved: the saved plan is refused, naming what moved.
	_, errOut, code = runCLI(t, "apply", filepath.Join(dir, "p1.json"))
	if code != 1 || !strings.Contains(errOut, "is stale") || !strings.Contains(errOut, "sim:HorizontalPodAutoscaler/shop/checkout spec.minReplicas: was 2 (manager kubectl-client-side-apply), now 3 (manager setpoint)") {
		t.Fatalf("stale plan: %d %s", code, errOut)
	}
	// A fresh saved plan applies (inside the cooldown nothing is left to
	// apply, so the plan is empty) and apply then plan agree.
	out, _, code = runCLI(t, "plan", "--detailed-exitcode", "--out", filepath.Join(dir, "p2.json"), dir)
	if code != 0 || !strings.Contains(out, "cooldown 0 s of 120 s") {
		t.Fatalf("after apply: %d\n%s", code, out)
	}
	if _, errOut, code = runCLI(t, "apply", filepath.Join(dir, "p2.json")); code != 0 {
		t.Fatalf("fresh saved plan: %d %s", code, errOut)
	}
	// An edited plan file is refused.
	b, _ := os.ReadFile(filepath.Join(dir, "p2.json"))
	os.WriteFile(filepath.Join(dir, "p3.json"), []byte(strings.Replace(string(b), "(manager setpoint)", "(manager someone)", 1)), 0o644)
	if _, errOut, code = runCLI(t, "apply", filepath.Join(dir, "p3.json")); code != 1 || !strings.Contains(errOut, "was edited") {
		t.Fatalf("edited plan: %d %s", code, errOut)
	}
	// So is one whose changes were edited, even with its observations
	// intact.
	os.WriteFile(filepath.Join(dir, "p4.json"), []byte(strings.Replace(string(b), `"held": [`, `"held": [{"address": "sim:Deployment/shop/checkout", "attribute": "spec.replicas", "action": "update", "to": "9", "wanted": "9", "reason": "", "spec": "x", "specPos": "", "dimension": "replicas", "value": {"type": "count", "value": "9"}},`, 1)), 0o644)
	if _, errOut, code = runCLI(t, "apply", filepath.Join(dir, "p4.json")); code != 1 || !strings.Contains(errOut, "changes do not match their digest") {
		t.Fatalf("edited changes: %d %s", code, errOut)
	}
	// And a plan whose specs were edited since.
	nfrPath := filepath.Join(dir, "checkout.nfr.yaml")
	src, _ := os.ReadFile(nfrPath)
	os.WriteFile(nfrPath, []byte(strings.Replace(string(src), "minRPS: 400", "minRPS: 500", 1)), 0o644)
	if _, errOut, code = runCLI(t, "apply", filepath.Join(dir, "p2.json")); code != 1 || !strings.Contains(errOut, "NFR/shop/checkout: edited") {
		t.Fatalf("edited spec: %d %s", code, errOut)
	}
	st, err := backend.Load(context.Background())
	if err != nil || len(st.Objects()) == 0 {
		t.Fatalf("state: %v", err)
	}
}

// TestConcurrentApplies starts applies at once: the state lock lets one
// apply the plan's changes; the others are refused while it holds the
// lock, or find nothing left to do after it. Without the lock two of them
// would plan from the same state and apply twice.
func TestConcurrentApplies(t *testing.T) {
	dir := copySpecs(t, quick...)
	const n = 6
	var wg sync.WaitGroup
	codes := make([]int, n)
	outs, errs := make([]string, n), make([]string, n)
	start := make(chan struct{})
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := exec.Command(binary, "apply", "--auto-approve", dir)
			var o, e strings.Builder
			cmd.Stdout, cmd.Stderr = &o, &e
			<-start
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			}
			outs[i], errs[i] = o.String(), e.String()
		}(i)
	}
	close(start)
	wg.Wait()
	applied, locked := 0, 0
	re := regexp.MustCompile(`Apply complete: (\d+) applied`)
	for i, c := range codes {
		switch {
		case c == 0:
			m := re.FindStringSubmatch(outs[i])
			if m == nil {
				t.Fatalf("apply %d: %s", i, outs[i])
			}
			k, _ := strconv.Atoi(m[1])
			applied += k
		case c == 1 && strings.Contains(errs[i], "state is locked by "):
			locked++
		default:
			t.Errorf("apply %d: exit %d: %s", i, c, errs[i])
		}
	}
	if applied != 8 {
		t.Fatalf("the plan's 8 changes were applied %d times over %d applies:\n%s", applied, n, strings.Join(outs, "\n"))
	}
	if locked == 0 {
		t.Fatal("no apply ran while another held the lock: the test proved nothing")
	}
	if _, err := state.NewFile(filepath.Join(dir, ".setpoint", "state.json")).Load(context.Background()); err != nil {
		t.Fatalf("state after concurrent applies: %v", err)
	}
}

func TestCorruptStateIsReported(t *testing.T) {
	dir := copySpecs(t)
	if _, errOut, code := runCLI(t, "plan", dir); code != 0 {
		t.Fatalf("first plan: %s", errOut)
	}
	shards, _ := filepath.Glob(filepath.Join(dir, ".setpoint", "state.json.d", "*HorizontalPodAutoscaler_shop_checkout*"))
	if len(shards) != 1 {
		t.Fatalf("want the HPA's shard: %v", shards)
	}
	b, _ := os.ReadFile(shards[0])
	bad := strings.Replace(string(b), `"attrs":{`, `"attrs":{"x":{},`, 1)
	os.WriteFile(shards[0], []byte(bad), 0o644)
	_, errOut, code := runCLI(t, "plan", dir)
	if code != 1 || !strings.Contains(errOut, "corrupt") || !strings.Contains(errOut, filepath.Base(shards[0])) {
		t.Fatalf("%d %s", code, errOut)
	}
	if b, _ := os.ReadFile(shards[0]); string(b) != bad {
		t.Fatal("the corrupt shard was rewritten")
	}
	// A state file of the earlier single-file format is reported too.
	os.WriteFile(filepath.Join(dir, ".setpoint", "state.json"), []byte(`{"version":1,"checksum":"00","entries":{}}`), 0o644)
	if _, errOut, code := runCLI(t, "plan", dir); code != 1 || !strings.Contains(errOut, "state.json") {
		t.Fatalf("old format: %d %s", code, errOut)
	}
}

func TestBrokenSpecDoesNotStopTheOthers(t *testing.T) {
	dir := copySpecs(t, append(quick, [3]string{"inventory.nfr.yaml", "throughput: {minRPS: 120}", "throughput: {minRPS: lots}"})...)
	out, errOut, code := runCLI(t, "plan", dir)
	if code != 1 || !strings.Contains(errOut, "inventory.nfr.yaml:9:24: spec.throughput.minRPS") || !strings.Contains(out, "spec.minReplicas: 2 → 3") {
		t.Fatalf("%d\n%s\n%s", code, out, errOut)
	}
}

func TestSimCommand(t *testing.T) {
	out, errOut, code := runCLI(t, "sim", "--until", "20m", "specs")
	if code != 0 || errOut != "" {
		t.Fatalf("%d %s", code, errOut)
	}
	for _, want := range []string{"] ~ sim:HorizontalPodAutoscaler/shop/checkout spec.minReplicas: 2 → 3", "Simulated 20m0s of trace", "shop/checkout (p99 ≤ 250ms)", "  setpoint  ",
		"] + sim:RouteGroup/shop/checkout-vip config: ", "route group shop/checkout-vip on 127.100.0.1:8080 (table enforce since 5s)", "  127.0.0.1:9002 *  ",
		"node compute-a (1x8x2, pool=compute): node policy default/latency-critical, cpus enforce;", "node general-a (2x4x1, pool=general): no node policy"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// sim never touches the directory's state.
	if _, err := os.Stat("../../specs/.setpoint/state.json"); err == nil {
		t.Error("sim wrote the directory's state")
	}
	out, _, code = runCLI(t, "sim", "--json", "--until", "5m", "specs")
	var s struct {
		Ticks   int
		Applies int
	}
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Ticks != 60 {
		t.Fatalf("json: %d %s", code, out)
	}
}

// TestWatchLiveEdits runs the real binary on a copy of specs/ and edits
// files under it: a good edit is applied, a broken one is reported while the
// last good version keeps running, and SIGINT stops it cleanly.
func TestWatchLiveEdits(t *testing.T) {
	dir := copySpecs(t)
	w := startProc(t, "watch", dir)
	logs := &w.logs
	waitFor := func(what string) { t.Helper(); w.waitLog(t, 10*time.Second, what) }
	waitFor("msg=watching")
	// The start's reconcile first (it applies fib): an edit before it ends
	// would be read by it, and applied with reason "start".
	waitFor(`msg=applied reason=start address=sim:KnativeService/default/fib`)
	edit := func(file, old, new string) {
		p := filepath.Join(dir, file)
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An edit's reason may come joined with the tick's ("edit of f; tick"):
	// a tick that falls within the debounce finds the edit by its rescan
	// and enqueues both at once.
	waitEdit := func(file, rest string) {
		t.Helper()
		re := regexp.MustCompile(`msg=applied reason="(?:[^"]*; )?edit of ` + regexp.QuoteMeta(file) + `(?:; [^"]*)?" ` + regexp.QuoteMeta(rest))
		testutil.Eventually(t, 10*time.Second, "log "+re.String(), func() bool { return re.MatchString(logs.String()) })
	}
	edit("checkout.nfr.yaml", "stability: 3m", "stability: 0s")
	waitEdit("checkout.nfr.yaml", "address=sim:HorizontalPodAutoscaler/shop/checkout attribute=spec.minReplicas from=2 to=3")
	edit("checkout.nfr.yaml", "minRPS: 400", "minRPS: [")
	waitFor(`msg="edit rejected; the last good version keeps running"`)
	if !strings.Contains(logs.String(), "checkout.nfr.yaml:13:") {
		t.Errorf("the rejection should give the position:\n%s", logs.String())
	}
	// An edit of another file still reconciles, next to the broken one.
	edit("inventory.nfr.yaml", "memory: enforce", "memory: enforce\n  safety: {stability: 0s}")
	waitEdit("inventory.nfr.yaml", "address=sim:Deployment/shop/inventory")
	w.stop(t, 5*time.Second)
}

// TestSimProviderRestartResumes: the sim world runs in its own process; it
// is killed after an apply, restarted by the next call (after the backoff)
// and resumes from its state file, and its metrics keep flowing.
func TestSimProviderRestartResumes(t *testing.T) {
	// The provider process, not the world inside (plan's own default).
	t.Setenv("SETPOINT_PROVIDERS", "process")
	dir := copySpecs(t, quick...)
	ws, err := openWorkspace(dir, simOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	ctx := context.Background()
	var applied int
	err = ws.withState(ctx, "test", 0, func(st *state.State) error {
		p := ws.eng.Plan(ctx, ws.now, st, nil)
		for _, r := range ws.eng.Apply(ctx, ws.now, p, st) {
			if r.Err == "" {
				applied++
			}
		}
		return nil
	})
	if err != nil || applied == 0 {
		t.Fatalf("apply: %v, %d applied", err, applied)
	}
	pid := ws.mgr.Pid("sim")
	if pid <= 0 {
		// Kill(0) would be this test's own process group.
		t.Fatalf("no sim provider process: pid %d", pid)
	}
	ws.mgr.RestartBackoff = func(int) time.Duration { return 0 }
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	hpa := providers.Address{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}
	minR := addrs.MustPath("spec.minReplicas")
	// The first call finds it gone; the next, once the (injected, short)
	// backoff has passed, restarts it.
	ws.providers["sim"].Read(ctx, providers.ReadRequest{Now: ws.now, Addresses: []providers.Address{hpa}})
	var r providers.ReadResponse
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = ws.providers["sim"].Read(ctx, providers.ReadRequest{Now: ws.now.Add(time.Minute), Addresses: []providers.Address{hpa}})
		if len(r.Objects) == 1 && r.Objects[0].Exists || time.Now().After(deadline) {
			break
		}
	}
	if len(r.Objects) != 1 || r.Objects[0].Attributes[minR] != values.CountOf(3) || r.Objects[0].Managers[minR] != "setpoint" {
		t.Fatalf("after the restart: %+v %+v", r.Objects, r.Diagnostics)
	}
	if np := ws.mgr.Pid("sim"); np == pid || np == 0 {
		t.Fatalf("no new process: %d", np)
	}
	// Signals resume too: the store gets the new instance's samples.
	before := ws.store.Stats().MaxT
	ws.eng.Feeds[0].Pull(ctx, ws.now.Add(2*time.Minute))
	if after := ws.store.Stats().MaxT; after <= before {
		t.Fatalf("no new samples after the restart: %d → %d", before, after)
	}
}

// TestApplyConfirmsOnATerminal runs apply under a real pseudo-terminal
// (util-linux script): "yes" applies, anything else cancels.
func TestApplyConfirmsOnATerminal(t *testing.T) {
	for _, c := range []struct {
		answer, want string
		code         int
	}{
		{"no\n", "apply cancelled", 1},
		{"yes\n", "Apply complete: 8 applied, 0 failed", 0},
	} {
		dir := copySpecs(t, quick...)
		cmd := exec.Command("script", "-q", "-e", "-c", binary+" apply "+dir, "/dev/null")
		cmd.Stdin = strings.NewReader(c.answer)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(string(out), "Apply these changes? Only 'yes' will be accepted:") || !strings.Contains(string(out), c.want) {
			t.Errorf("answer %q: exit %d\n%s", c.answer, code, out)
		}
	}
}

// reconcileRig is what watch's worker reconciles with: the directory's
// workspace and a queue on a fake clock at the sim world's time.
func reconcileRig(t *testing.T, edits ...[3]string) (*workspace, *watch.FakeClock, *watch.Queue, watch.Set) {
	t.Helper()
	ws, err := openWorkspace(copySpecs(t, edits...), simOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.close)
	clk := watch.NewFakeClock(ws.now)
	return ws, clk, watch.NewQueue(clk), watch.Set{Env: ws.env, Specs: ws.specs}
}

// TestReconcileRequeuesAtTheWindowsEnd: a change held by its stability
// window comes back exactly when the window ends, on the clock the queue
// runs on (virtual time here).
func TestReconcileRequeuesAtTheWindowsEnd(t *testing.T) {
	ws, clk, q, set := reconcileRig(t)
	res := reconcileKeys(context.Background(), ws, q, set, []string{"NFR/shop/checkout"}, "test", clk, time.Second, nil)
	if r := res["NFR/shop/checkout"]; r.Err != nil || r.RequeueAfter != 3*time.Minute {
		t.Fatalf("want a requeue when the 3m window ends: %+v", res)
	}
	// Ten virtual seconds later the window has 170 s to go.
	clk.Advance(10 * time.Second)
	res = reconcileKeys(context.Background(), ws, q, set, []string{"NFR/shop/checkout"}, "test", clk, time.Second, nil)
	if r := res["NFR/shop/checkout"]; r.RequeueAfter != 170*time.Second {
		t.Fatalf("want 170 s: %+v", res)
	}
}

// TestReconcileComesBackForTheNextStep: a step applied short of what was
// wanted brings its spec back at once, and that plan says when the rest
// is due (the cooldown's end), so a multi-step move never waits for a tick.
func TestReconcileComesBackForTheNextStep(t *testing.T) {
	ws, clk, q, set := reconcileRig(t, quick...)
	key := "NFR/shop/checkout"
	res := reconcileKeys(context.Background(), ws, q, set, []string{key}, "test", clk, time.Second, nil)
	if r := res[key]; r.Err != nil || r.RequeueAfter != time.Second {
		t.Fatalf("a bounded step applied: want to come back at once: %+v", res)
	}
	res = reconcileKeys(context.Background(), ws, q, set, []string{key}, "test", clk, time.Second, nil)
	if r := res[key]; r.RequeueAfter != 2*time.Minute {
		t.Fatalf("then at the cooldown's end: %+v", res)
	}
}

// TestSimScheduleSleepsAndWakes runs the shipped demo over the whole
// trace: reports, rarely asked for, sleeps at zero in its idle stretches
// and wakes on the next request, which its gateway holds meanwhile; no
// request is lost (each waited less than the gateway's 30 s), and it runs
// fewer replica-hours than one pod all along.
func TestSimScheduleSleepsAndWakes(t *testing.T) {
	out, errOut, code := runCLI(t, "sim", "specs")
	if code != 0 || errOut != "" {
		t.Fatalf("%d %s", code, errOut)
	}
	sleeps := strings.Count(out, "~ sim:Deployment/shop/reports spec.replicas: 1 → 0 (wanted 0: idle")
	wakes := strings.Count(out, "~ sim:Deployment/shop/reports spec.replicas: 0 → 1 (wanted 1: wake up to 1")
	if sleeps < 3 || wakes < 3 {
		t.Fatalf("%d sleeps, %d wakes; want several of each:\n%s", sleeps, wakes, out)
	}
	out, _, code = runCLI(t, "sim", "--json", "specs")
	var s simtable.Summary
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("json: %d %s", code, out)
	}
	// The demo's fleet grows at the peak, its nodes stepping at most 6
	// times an hour on any cluster (a scale-down waits for its spare step
	// to last). Since they do, the second new cluster comes late enough
	// that none empties for its 10m within the hour: deletes are
	// engine/kinds/fleet's sim tests'.
	if len(s.Fleets) != 1 || s.Fleets[0].Created == 0 || s.Fleets[0].Steps == 0 {
		t.Errorf("fleets %+v: want clusters created and nodes stepped", s.Fleets)
	}
	for _, f := range s.Fleets {
		if len(f.PerCluster) == 0 {
			t.Errorf("fleet %s: no per-cluster figures", f.Fleet)
		}
		for _, c := range f.PerCluster {
			if c.MostInAnHour > 6 {
				t.Errorf("fleet %s cluster %s: %d node steps in an hour, want at most 6", f.Fleet, c.Name, c.MostInAnHour)
			}
		}
	}
	// The demo's route group moves its degraded backend's traffic to the
	// others for the five minutes it is degraded, and back, without
	// flapping any backend: a healthy backend's queue blip moves its slots
	// once, and they come back no sooner than a hold later. On the
	// Environment's seed (1) and, each a sim of its own, on seeds 2 to 5.
	routes := func(t *testing.T, seed int, s simtable.Summary) {
		t.Helper()
		if len(s.RouteGroups) != 1 || len(s.RouteGroups[0].Backends) != 3 || len(s.RouteGroups[0].Phases) != 3 {
			t.Fatalf("seed %d: route groups %+v: want the demo's", seed, s.RouteGroups)
		}
		for _, b := range s.RouteGroups[0].Backends {
			degraded := b.Address == "127.0.0.1:9002"
			if during := b.Share[1]; degraded && during > 0.1 || !degraded && during < 0.4 || b.Share[0] < 0.3 || b.Share[2] < 0.3 || b.Flaps != 0 {
				t.Errorf("seed %d: %s: shares %v before / during / after its window, %d flaps", seed, b.Address, b.Share, b.Flaps)
			}
		}
	}
	routes(t, 1, s)
	for seed := 2; seed <= 5; seed++ {
		t.Run("routes seed "+strconv.Itoa(seed), func(t *testing.T) {
			t.Parallel()
			out, _, code := runCLI(t, "sim", "--json", "--seed", strconv.Itoa(seed), "specs")
			var s simtable.Summary
			if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
				t.Fatalf("seed %d json: %d %s", seed, code, out)
			}
			routes(t, seed, s)
		})
	}
	// The demo's node policy runs on the two compute nodes, whose checkout
	// pool holds the CPUs its containers request (at least 2, never the
	// reserved CPU 0); the general node runs none. (How a pool grows and
	// shrinks with its pods is providers/sim's nodes test.)
	if len(s.Nodes) != 3 || s.Nodes[2].Policy != "" || s.Nodes[2].Rebalances != 0 {
		t.Fatalf("nodes %+v: want the demo's three, the last without a policy", s.Nodes)
	}
	for _, n := range s.Nodes[:2] {
		if n.Policy != "default/latency-critical" || n.Rebalances < 2 || len(n.Pools) != 3 || n.Pools[0].Name != "checkout" ||
			n.Pools[0].MinSize < 2 || int64(1000*len(n.Pools[0].CPUs)) < n.Pools[0].RequestMilli || len(n.Pools[0].Containers) == 0 || n.Pools[0].CPUs.Contains(0) {
			t.Errorf("node %+v: want latency-critical, its checkout pool of at least 2 CPUs holding its containers' requests, never with reserved CPU 0", n)
		}
	}
	for _, w := range s.Workloads {
		if w.Workload != "shop/reports" {
			continue
		}
		hours, _ := time.ParseDuration(s.Virtual)
		if w.Dropped != 0 || w.Cold == 0 || w.ReplicaHours >= hours.Hours() {
			t.Fatalf("reports: %d dropped, %d held while it woke, %.2f replica-hours over %s; want none dropped, some held, less than one pod throughout", w.Dropped, w.Cold, w.ReplicaHours, s.Virtual)
		}
		return
	}
	t.Fatalf("no report of shop/reports in %s", out)
}

// The plan for a pull request: Markdown, read-only (nothing saved, no
// lock), each spec in its own section; an unknown format is refused.
func TestPlanMarkdown(t *testing.T) {
	dir := copySpecs(t)
	out, errOut, code := runCLI(t, "plan", "--read-only", "--format", "markdown", dir)
	if code != 0 || !strings.HasPrefix(out, "#### setpoint plan\n") || !strings.Contains(out, "<details><summary><code>NFR/shop/checkout</code>") ||
		!strings.Contains(out, "```diff\n") {
		t.Fatalf("plan --format markdown: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, ".setpoint")); !os.IsNotExist(err) {
		t.Fatalf("a read-only plan wrote its state: %v", err)
	}
	if _, errOut, code := runCLI(t, "plan", "--read-only", "--format", "yaml", dir); code != 1 || !strings.Contains(errOut, "want text, json or markdown") {
		t.Fatalf("--format yaml: exit %d, %s", code, errOut)
	}
	// A spec that does not load is in the comment, where the reviewer
	// reads, not only on stderr.
	if err := os.WriteFile(filepath.Join(dir, "inventory.nfr.yaml"), []byte("apiVersion: setpoint.dev/v1alpha1\nkind: NFR\nmetadata: {name: inventory, namespace: shop}\nspec:\n  target: {kind: Deployment, name: inventory}\n  latency: {p99: 250}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, "plan", "--read-only", "--format", "markdown", dir)
	if want := "inventory.nfr.yaml:6:18): spec.latency.p99: wrong type: 250 (expected a duration"; code != 1 || !strings.Contains(out, want) || !strings.Contains(out, " 1 error.") {
		t.Fatalf("plan --format markdown with a broken spec: exit %d, want %q in:\n%s", code, want, out)
	}
}
