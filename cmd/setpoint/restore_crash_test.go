package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// inventoryMem are the inventory Deployment's memory attributes the NFR
// cuts and restores.
var inventoryMem = []string{
	"spec.template.spec.containers[name=app].resources.limits.memory",
	"spec.template.spec.containers[name=app].resources.requests.memory",
}

const inventoryAddr = "sim:Deployment/shop/inventory"

// readWorld reads addresses from the directory's providers, as a plan
// would at the directory's time.
func readWorld(t *testing.T, dir string, as ...providers.Address) map[providers.Address]providers.Object {
	t.Helper()
	w, err := openWorkspace(dir, simOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	byProv := map[string][]providers.Address{}
	for _, a := range as {
		byProv[a.Provider] = append(byProv[a.Provider], a)
	}
	out := map[providers.Address]providers.Object{}
	for name, list := range byProv {
		prov, ok := w.providers[name]
		if !ok {
			t.Fatalf("no provider %q", name)
		}
		resp := prov.Read(context.Background(), providers.ReadRequest{Now: w.now, Addresses: list})
		if len(resp.Diagnostics) > 0 {
			t.Fatalf("read: %v", resp.Diagnostics)
		}
		for _, o := range resp.Objects {
			out[o.Address] = o
		}
	}
	return out
}

func mustAddr(t *testing.T, s string) providers.Address {
	t.Helper()
	a, err := providers.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// editSpec replaces old by new in a spec file (old must be there).
func editSpec(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A restore cut off by a crash (it reached the provider, the state save
// did not) is settled as done when the user's value reads back; the next
// apply of another field of the object does not send the stale record of
// the cut again, and the restored fields are no longer setpoint's.
func TestRestoreCutOffByACrash(t *testing.T) {
	dir := copySpecs(t, [3]string{"inventory.nfr.yaml", "memory: enforce", "memory: enforce\n  safety: {stability: 0s, cooldown: 0s}"})
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	st := showState(t, dir)
	if got := st[inventoryAddr+" "+inventoryMem[0]]; got.User != "1Gi" || got.Applied != "768Mi" {
		t.Fatalf("the first apply cuts the limit: %+v", got)
	}
	editSpec(t, dir, "inventory.nfr.yaml", "memory: enforce", `memory: "off"`)
	cmd := exec.Command(binary, "apply", "--auto-approve", dir)
	cmd.Env = append(os.Environ(), crashAfterApplyEnv+"=1")
	if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != crashExitCode {
		t.Fatalf("the killed restore: exit %d\n%s", cmd.ProcessState.ExitCode(), out)
	}
	planOut, errOut, code := runCLI(t, "plan", dir)
	if code != 0 {
		t.Fatalf("plan: %s", errOut)
	}
	if !strings.Contains(planOut, "a restore cut off before it was recorded had happened") {
		t.Fatalf("the plan must say the cut-off restore happened:\n%s", planOut)
	}
	st = showState(t, dir)
	for _, m := range inventoryMem {
		if got, ok := st[inventoryAddr+" "+m]; ok && (got.Applied != "" || got.Pending != "") {
			t.Fatalf("%s after the settled restore: %+v (want no record)", m, got)
		}
	}
	// Another field of the object changes.
	editSpec(t, dir, "inventory.nfr.yaml", "minRPS: 120", "minRPS: 400")
	out, errOut, code := runCLI(t, "apply", "--auto-approve", dir)
	if code != 0 || !strings.Contains(out, "spec.replicas: 1 → 2") {
		t.Fatalf("apply of replicas: %d %s\n%s", code, errOut, out)
	}
	a := mustAddr(t, inventoryAddr)
	o := readWorld(t, dir, a)[a]
	for m, want := range map[string]string{inventoryMem[0]: "1Gi", inventoryMem[1]: "512Mi"} {
		p := addrs.MustPath(m)
		if got := o.Attributes[p]; got.String() != want || o.Managers[p] == gate.SetpointManager {
			t.Fatalf("%s: %s (manager %q), want the user's %s handed back", m, got, o.Managers[p], want)
		}
	}
	if planOut, _, _ := runCLI(t, "plan", dir); strings.Contains(planOut, "restoring the user's value") {
		t.Fatalf("nothing is left to restore:\n%s", planOut)
	}
}

// checkStateIsTheWorld fails unless every record of the state is what the
// sim world holds: an applied value is there and setpoint's, nothing is
// pending, and a recorded user value with nothing applied is the world's.
func checkStateIsTheWorld(t *testing.T, dir, when string) {
	t.Helper()
	st := showState(t, dir)
	var as []providers.Address
	seen := map[providers.Address]bool{}
	for k := range st {
		a := mustAddr(t, k[:strings.IndexByte(k, ' ')])
		if !seen[a] {
			seen[a] = true
			as = append(as, a)
		}
	}
	// And the objects setpoint writes whether the state knows them or
	// not: a field that is setpoint's in the world must be in the state.
	for _, a := range []string{inventoryAddr, "sim:HorizontalPodAutoscaler/shop/checkout", "sim:Deployment/shop/checkout", "sim:Deployment/shop/reports"} {
		if x := mustAddr(t, a); !seen[x] {
			seen[x] = true
			as = append(as, x)
		}
	}
	world := readWorld(t, dir, as...)
	for _, o := range world {
		for p, m := range o.Managers {
			if m != gate.SetpointManager {
				continue
			}
			if en, ok := st[o.Address.String()+" "+p.String()]; !ok || en.Applied == "" {
				t.Fatalf("%s: %s %s is setpoint's in the world (%s) but the state records nothing applied", when, o.Address, p, o.Attributes[p])
			}
		}
	}
	for k, en := range st {
		i := strings.IndexByte(k, ' ')
		a, p := mustAddr(t, k[:i]), addrs.MustPath(k[i+1:])
		o := world[a]
		if en.Pending != "" {
			t.Fatalf("%s: %s is still pending after a plan: %+v", when, k, en)
		}
		got, has := o.Attributes[p]
		switch {
		case en.Applied != "" && strings.HasSuffix(k, " config"):
			// A structured config: setpoint's, whatever its text.
			if !has || o.Managers[p] != gate.SetpointManager {
				t.Fatalf("%s: %s recorded as applied but the world's is %s (manager %q)", when, k, got, o.Managers[p])
			}
		case en.Applied != "":
			if !has || got.String() != en.Applied || o.Managers[p] != gate.SetpointManager {
				t.Fatalf("%s: %s recorded as applied %s but the world has %s (manager %q)", when, k, en.Applied, got, o.Managers[p])
			}
		case en.User != "" && en.Released == "" && has && o.Managers[p] == gate.SetpointManager:
			t.Fatalf("%s: %s is setpoint's in the world (%s) but the state records nothing applied", when, k, got)
		}
	}
}

// Apply is killed at random moments, over edits that cut memory, restore
// it and move replicas: after each kill the next plan settles the journal
// and the state is what the world holds, and the user's values are never
// lost. The seed is logged, so a failure can be replayed.
func TestRandomKillsDuringApply(t *testing.T) {
	k := newKillRig(t, 1)
	rng, dir := k.rng, k.dir
	// How long an apply takes here, uninterrupted: kills fall within it.
	start := time.Now()
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", dir); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	span := time.Since(start)
	for i := range 20 {
		k.edit(t)
		cmd := exec.Command(binary, "apply", "--auto-approve", dir)
		// A kill by the clock rarely falls between the provider's apply
		// and the state's save: half the rounds die exactly there, or
		// just before the providers are called, the rest at random.
		after := time.Duration(rng.Int64N(int64(span)))
		switch rng.IntN(4) {
		case 0:
			cmd.Env, after = append(os.Environ(), crashAfterApplyEnv+"=1"), span*10
		case 1:
			cmd.Env, after = append(os.Environ(), crashBeforeProviderEnv+"=1"), span*10
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		timer := time.AfterFunc(after, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		_ = cmd.Wait()
		timer.Stop()
		if _, errOut, code := runCLI(t, "plan", dir); code != 0 {
			t.Fatalf("round %d: plan after a kill at %s: %s", i, after, errOut)
		}
		checkStateIsTheWorld(t, dir, "round "+itoa(i)+" (killed at "+after.String()+")")
	}
	// The user's memory values survive every cut and restore: recorded
	// while setpoint holds the field, in the world once it is handed back.
	st := showState(t, dir)
	world := readWorld(t, dir, mustAddr(t, inventoryAddr))[mustAddr(t, inventoryAddr)]
	for m, user := range map[string]string{inventoryMem[0]: "1Gi", inventoryMem[1]: "512Mi"} {
		en, ok := st[inventoryAddr+" "+m]
		switch {
		case ok && en.Applied != "" && en.User != user:
			t.Fatalf("%s: user value %q, want %s", m, en.User, user)
		case (!ok || en.Applied == "") && world.Attributes[addrs.MustPath(m)].String() != user:
			t.Fatalf("%s: not setpoint's, and the world has %s, not the user's %s", m, world.Attributes[addrs.MustPath(m)], user)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A saved plan carries what the state needs: for every kind, `plan --out F`
// then `apply F` leaves the state `apply` leaves, with --read-only (which
// saves nothing when it plans) and without.
func TestSavedPlanLeavesTheStateOfApply(t *testing.T) {
	direct := copySpecs(t, quick...)
	if _, errOut, code := runCLI(t, "apply", "--auto-approve", direct); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	want := showState(t, direct)
	kinds := map[string]bool{}
	for k, en := range want {
		if en.User != "" || en.Applied != "" {
			kinds[k[strings.IndexByte(k, ':')+1:strings.IndexByte(k, '/')]] = true
		}
	}
	for _, kind := range []string{"Deployment", "HorizontalPodAutoscaler", "KnativeService", "Cluster", "RouteGroup", "NodePolicy"} {
		if !kinds[kind] {
			t.Fatalf("the direct apply records nothing of a %s: the comparison would not cover it (%v)", kind, kinds)
		}
	}
	for _, flags := range [][]string{{"--read-only"}, nil} {
		dir := copySpecs(t, quick...)
		f := filepath.Join(t.TempDir(), "plan.json")
		if _, errOut, code := runCLI(t, append(append([]string{"plan"}, flags...), "--out", f, dir)...); code != 0 {
			t.Fatalf("plan %v: %s", flags, errOut)
		}
		if _, errOut, code := runCLI(t, "apply", f); code != 0 {
			t.Fatalf("apply of the plan %v made: %s", flags, errOut)
		}
		got := showState(t, dir)
		for k, w := range want {
			g := got[k]
			if g.User != w.User || g.Applied != w.Applied || strings.Join(g.By, ",") != strings.Join(w.By, ",") || g.Released != w.Released || g.Pending != w.Pending {
				t.Errorf("plan %v --out, apply: %s is %+v, apply alone leaves %+v", flags, k, g, w)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("plan %v --out, apply: %s recorded (%+v), apply alone records nothing", flags, k, got[k])
			}
		}
	}
}

// A one-shot plan after watch sees the world as watch left it: watch
// applied at later virtual times than the sim config's start, and a plan
// at start would see none of that and plan it again.
func TestPlanAfterWatchSeesWhatWatchApplied(t *testing.T) {
	dir := copySpecs(t, [3]string{"inventory.nfr.yaml", "memory: enforce", "memory: enforce\n  safety: {stability: 0s, cooldown: 0s}"})
	w := startProc(t, "watch", dir)
	w.waitLog(t, 60*time.Second, "msg=watching")
	simState := filepath.Join(dir, ".setpoint", "sim-state.json")
	later := func() (bool, string) {
		changes, err := sim.LoadChanges(simState)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range changes {
			if c.Address.Name == "inventory" && c.At > 600 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d changes, none of inventory after 600 s", len(changes))
	}
	// Each edit raises inventory's replicas; virtual time runs with the
	// wall clock, so an edit applied after the first second lands later.
	rps, next := 120, []int{400, 800, 1600, 3200, 6400, 12800}
	testutil.Poll(t, 90*time.Second, time.Second, "a change of inventory at a later virtual time", func() (bool, string) {
		if ok, why := later(); ok || len(next) == 0 {
			return ok, why
		}
		editSpec(t, dir, "inventory.nfr.yaml", "minRPS: "+itoa(rps), "minRPS: "+itoa(next[0]))
		rps, next = next[0], next[1:]
		return later()
	}, w.logs.String)
	w.stop(t, 30*time.Second)
	if _, errOut, code := runCLI(t, "plan", dir); code != 0 {
		t.Fatalf("plan after watch: %s", errOut)
	}
	checkStateIsTheWorld(t, dir, "plan after watch")
}

// Watch is killed at random moments, over edits that cut memory, restore
// it and move replicas: after each kill the next plan settles the journal
// and the state is what the world holds. The seed is logged.
func TestRandomKillsDuringWatch(t *testing.T) {
	k := newKillRig(t, 2)
	rng, dir := k.rng, k.dir
	for i := range 10 {
		cmd := exec.Command(binary, "watch", dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// An edit while it starts: its reconcile and the start's race.
		k.edit(t)
		// The moment of the kill, not a verdict: anywhere in the first
		// three seconds (loading, the start's reconcile, the edit's).
		after := time.Duration(rng.Int64N(int64(3 * time.Second)))
		timer := time.AfterFunc(after, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		_ = cmd.Wait()
		timer.Stop()
		if _, errOut, code := runCLI(t, "plan", dir); code != 0 {
			t.Fatalf("round %d: plan after a kill at %s: %s", i, after, errOut)
		}
		checkStateIsTheWorld(t, dir, "round "+itoa(i)+" (watch killed at "+after.String()+")")
	}
}

// killRig is a copy of the shipped specs with inventory's safety off, and
// the random edits each kill round makes to it.
type killRig struct {
	rng *rand.Rand
	dir string
	mem string
	rps int
}

// newKillRig logs its seed, so a failing round can be replayed.
func newKillRig(t *testing.T, stream uint64) *killRig {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return &killRig{rng: rand.New(rand.NewPCG(seed, stream)), mem: "enforce", rps: 120,
		dir: copySpecs(t, [3]string{"inventory.nfr.yaml", "memory: enforce", "memory: enforce\n  safety: {stability: 0s, cooldown: 0s}"},
			[3]string{"checkout.nfr.yaml", "stability: 3m", "stability: 0s"})}
}

// edit changes something each round: memory enforcement flips (a cut or
// a restore) half the time, and the throughput target moves replicas.
func (k *killRig) edit(t *testing.T) {
	t.Helper()
	if k.rng.IntN(2) == 0 {
		next := map[string]string{"enforce": `"off"`, `"off"`: "enforce"}[k.mem]
		editSpec(t, k.dir, "inventory.nfr.yaml", "memory: "+k.mem, "memory: "+next)
		k.mem = next
	}
	next := 120 + 80*k.rng.IntN(5)
	editSpec(t, k.dir, "inventory.nfr.yaml", "minRPS: "+itoa(k.rps), "minRPS: "+itoa(next))
	k.rps = next
}
