package plugin_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
)

var pluginDir string

// TestMain builds the misbehaving test provider once under every mode's
// name: real subprocesses throughout.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "setpoint-plugins")
	if err != nil {
		panic(err)
	}
	bin := filepath.Join(dir, "testprovider")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/testprovider").CombinedOutput(); err != nil {
		panic(string(out))
	}
	for _, mode := range []string{"good", "basic", "slow", "version", "malformed", "panic", "wire"} {
		if err := os.Link(bin, filepath.Join(dir, "setpoint-provider-"+mode)); err != nil {
			panic(err)
		}
	}
	pluginDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func manager() *plugin.Manager {
	return &plugin.Manager{PluginPath: []string{pluginDir}, Timeout: 10 * time.Second, Pins: map[string]string{}}
}

func addr(p, name string) providers.Address {
	return providers.Address{Provider: p, Kind: "Deployment", Namespace: "shop", Name: name}
}

var (
	replicas = addrs.MustPath("spec.replicas")
	appLabel = addrs.MustPath(`metadata.labels["app"]`)
)

// set is an update of spec.replicas to n, as manager.
func set(a providers.Address, n int64, manager string) providers.ObjectChange {
	return providers.ObjectChange{Address: a, Action: action.Update, Attributes: map[addrs.Path]values.Value{replicas: values.CountOf(n)},
		Changed: []addrs.Path{replicas}, Manager: manager}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func diagText(ds []providers.Diagnostic) string {
	var text []string
	for _, d := range ds {
		text = append(text, d.Error())
	}
	return strings.Join(text, "\n")
}

func TestUnknownProvider(t *testing.T) {
	m := manager()
	defer m.Close()
	err := m.Start("nope")
	if err == nil || !strings.Contains(err.Error(), `unknown provider "nope"`) || !strings.Contains(err.Error(), "setpoint-provider-nope") {
		t.Fatalf("got %v", err)
	}
}

// TestUnusablePlugin: a plugin file that is there but cannot run is named
// with what is wrong, not reported as missing.
func TestUnusablePlugin(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "setpoint-provider-noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "setpoint-provider-adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &plugin.Manager{PluginPath: []string{dir}}
	for name, want := range map[string]string{
		"noexec": "is not executable (mode -rw-r--r--; chmod +x it)",
		"adir":   "is a directory",
	} {
		_, err := m.Find(name)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "unknown provider") {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
}

// TestVersionMismatch: a provider built for protocol version 1 is refused
// with an error naming both versions.
func TestVersionMismatch(t *testing.T) {
	m := manager()
	defer m.Close()
	err := m.Start("version")
	if err == nil || !strings.Contains(err.Error(), "protocol version mismatch: setpoint speaks provider protocol version 3, the provider speaks version 1") {
		t.Fatalf("got %v", err)
	}
}

func TestChecksumPin(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(pluginDir, "setpoint-provider-good"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	m := manager()
	defer m.Close()
	m.Pins["good"] = strings.Repeat("0", 64)
	if err := m.Start("good"); err == nil || !strings.Contains(err.Error(), "does not match its sha256 pin") {
		t.Fatalf("wrong pin: %v", err)
	}
	m2 := manager()
	defer m2.Close()
	m2.Pins["good"] = hex.EncodeToString(sum[:])
	if err := m2.Start("good"); err != nil {
		t.Fatalf("right pin: %v", err)
	}
}

// marker makes a FIFO the slow provider writes a call's name to as the
// call begins, and returns its path and the lines read from it. The test
// holds it open for reading and writing, so the provider's open never
// blocks.
func marker(t *testing.T) (string, <-chan string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reached")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { f.Close() })
	return path, lines
}

// TestKilledMidCall: a provider killed with a signal once a call has
// reached it (it says so through a FIFO before hanging) has the call
// failed: for PlanChange and Apply every change of the batch is reported
// failed. It is not restarted before the backoff, and is after.
func TestKilledMidCall(t *testing.T) {
	changes := []providers.ObjectChange{set(addr("slow", "a"), 3, "setpoint"), set(addr("slow", "b"), 4, "setpoint")}
	calls := map[string]func(p providers.Full) (results []providers.ObjectResult, diags []providers.Diagnostic){
		"Read": func(p providers.Full) ([]providers.ObjectResult, []providers.Diagnostic) {
			r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("slow", "a")}})
			return nil, r.Diagnostics
		},
		"List": func(p providers.Full) ([]providers.ObjectResult, []providers.Diagnostic) {
			r := p.List(context.Background(), providers.ListRequest{Now: time.Now(), Provider: "slow", Kind: "Deployment"})
			return nil, r.Diagnostics
		},
		"PlanChange": func(p providers.Full) ([]providers.ObjectResult, []providers.Diagnostic) {
			r := p.PlanChange(context.Background(), providers.PlanChangeRequest{Now: time.Now(), Changes: changes})
			return r.Results, r.Diagnostics
		},
		"Apply": func(p providers.Full) ([]providers.ObjectResult, []providers.Diagnostic) {
			r := p.Apply(context.Background(), providers.ApplyRequest{Now: time.Now(), Changes: changes})
			return r.Results, r.Diagnostics
		},
	}
	for _, call := range []string{"Read", "List", "PlanChange", "Apply"} {
		t.Run(call, func(t *testing.T) {
			fifo, reached := marker(t)
			var backoff atomic.Int64
			backoff.Store(int64(time.Hour))
			m := manager()
			m.RestartBackoff = func(int) time.Duration { return time.Duration(backoff.Load()) }
			defer m.Close()
			cfg, _ := json.Marshal(map[string]string{"marker": fifo})
			p := m.Provider("slow", &providers.ConfigureRequest{Config: cfg})
			if err := m.Start("slow"); err != nil {
				t.Fatal(err)
			}
			pid := m.Pid("slow")
			type answer struct {
				results []providers.ObjectResult
				diags   []providers.Diagnostic
			}
			done := make(chan answer, 1)
			go func() {
				r, d := calls[call](p)
				done <- answer{r, d}
			}()
			select {
			case got := <-reached:
				if got != call {
					t.Fatalf("the provider reached %s, want %s", got, call)
				}
			case a := <-done:
				t.Fatalf("%s returned before reaching the provider: %+v", call, a)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s never reached the provider", call)
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var resp answer
			select {
			case resp = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return after the provider died", call)
			}
			if !strings.Contains(diagText(resp.diags), call+" failed") {
				t.Fatalf("want the call failed: %s", diagText(resp.diags))
			}
			if call == "PlanChange" || call == "Apply" {
				if len(resp.results) != len(changes) {
					t.Fatalf("want every change reported: %+v", resp.results)
				}
				for i, r := range resp.results {
					if r.Address != changes[i].Address || !strings.Contains(r.Err, "the batch failed") {
						t.Fatalf("a change of the dead batch was not failed: %+v", r)
					}
				}
			}
			// The backoff holds the restart, whatever is called.
			r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("slow", "a")}})
			if len(r.Diagnostics) == 0 || !strings.Contains(r.Diagnostics[0].Detail, "is down; it restarts at") {
				t.Fatalf("during backoff: %+v", r)
			}
			a := p.Apply(context.Background(), providers.ApplyRequest{Now: time.Now(), Changes: changes})
			if len(a.Results) != 2 || !strings.Contains(a.Results[1].Err, "is unavailable") || a.Results[1].Address != changes[1].Address {
				t.Fatalf("apply during backoff: %+v", a)
			}
			// Once the backoff is over, the next call starts it again.
			backoff.Store(0)
			if err := m.Start("slow"); err != nil {
				t.Fatalf("restart: %v", err)
			}
			if np := m.Pid("slow"); np == pid || !alive(np) {
				t.Fatalf("want a new process, got pid %d (old %d)", np, pid)
			}
		})
	}
}

func TestDefaultBackoff(t *testing.T) {
	// Without RestartBackoff, a provider that cannot start waits 1 s
	// before the next try, then 2 s. The backoff runs on a clock the test
	// moves: on the wall a busy machine could let the second start come a
	// second late and try again.
	m := manager()
	defer m.Close()
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	var at atomic.Int64 // ns after t0
	plugin.SetClock(m, func() time.Time { return t0.Add(time.Duration(at.Load())) })
	if err := m.Start("version"); err == nil {
		t.Fatal("the version provider started")
	}
	err := m.Start("version")
	if err == nil || !strings.Contains(err.Error(), "is down; it restarts at 12:00:01.000") || !strings.Contains(err.Error(), "(failed once in a row; last error: ") {
		t.Fatalf("second start: %v", err)
	}
	// Every call of one backoff says the same, so repeated lines collapse.
	at.Store(int64(999 * time.Millisecond))
	if again := m.Start("version"); again == nil || again.Error() != err.Error() {
		t.Fatalf("third start, 999ms on: %v, want %v", again, err)
	}
	// At 1 s it is tried again, fails again, and waits 2 s.
	at.Store(int64(time.Second))
	if err := m.Start("version"); err == nil || !strings.Contains(err.Error(), "protocol version mismatch") {
		t.Fatalf("start after the backoff: %v, want it tried again", err)
	}
	if err := m.Start("version"); err == nil || !strings.Contains(err.Error(), "is down; it restarts at 12:00:03.000 (failed 2 times in a row") {
		t.Fatalf("after the second failure: %v", err)
	}
}

func TestHungProviderTimesOut(t *testing.T) {
	m := manager()
	m.Timeout = 300 * time.Millisecond
	defer m.Close()
	p := m.Provider("slow", nil)
	// Started first: the process's start is not the calls' to time (on
	// a busy machine it alone can take seconds).
	if err := m.Start("slow"); err != nil {
		t.Fatal(err)
	}
	// Each call ends at the manager's 300ms; the bound tells that from
	// manager()'s 10s and the client's default of 30s, with room for a
	// busy machine.
	const bound = 5 * time.Second
	start := time.Now()
	r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("slow", "a")}})
	if len(r.Diagnostics) == 0 || !strings.Contains(r.Diagnostics[0].Detail, "DeadlineExceeded") {
		t.Fatalf("want a timeout: %+v", r)
	}
	if el := time.Since(start); el > bound {
		t.Fatalf("the read's timeout took %s", el)
	}
	start = time.Now()
	a := p.Apply(context.Background(), providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{set(addr("slow", "a"), 2, "setpoint")}})
	if len(a.Results) != 1 || !strings.Contains(a.Results[0].Err, "the batch failed") || !strings.Contains(a.Results[0].Err, "DeadlineExceeded") {
		t.Fatalf("want the apply timed out: %+v", a)
	}
	if el := time.Since(start); el > bound {
		t.Fatalf("the apply's timeout took %s", el)
	}
}

// TestReadApplyTyped: typed values and grouped changes round-trip through
// a real provider process.
func TestReadApplyTyped(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	ctx := context.Background()
	sc, diags := p.Schema(ctx)
	if len(diags) > 0 || len(sc.Kinds) != 1 || len(sc.Kinds[0].Attributes) != 1 || sc.Kinds[0].Attributes[0].Path != replicas || sc.Kinds[0].Attributes[0].Type != values.Count {
		t.Fatalf("schema: %+v %v", sc, diags)
	}
	a := addr("good", "typed")
	attrs := map[addrs.Path]values.Value{
		replicas: values.CountOf(3),
		addrs.MustPath("spec.template.spec.containers[name=app].resources.requests.memory"): values.BytesOf(256 << 20),
		addrs.MustPath("spec.template.spec.containers[name=app].resources.requests.cpu"):    values.MillicoresOf(500),
		addrs.MustPath("spec.progressDeadline"):                                             values.DurationOf(90 * time.Second),
		addrs.MustPath(`metadata.annotations["autoscaling.knative.dev/min-scale"]`):         values.StringOf("2"),
		addrs.MustPath("spec.routes"):                                                       mustStructured(t, `{"weights": [1, 2]}`),
	}
	changed := []addrs.Path{replicas}
	r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{{Address: a, Action: action.Create, Attributes: attrs, Changed: changed, Manager: "setpoint"}}})
	if len(r.Diagnostics) > 0 || len(r.Results) != 1 || r.Results[0].Err != "" || r.Results[0].Address != a || !sameValues(r.Results[0].After, attrs) {
		t.Fatalf("apply: %+v", r)
	}
	rd := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}})
	if len(rd.Diagnostics) > 0 || len(rd.Objects) != 1 {
		t.Fatalf("read: %+v", rd)
	}
	o := rd.Objects[0]
	if !o.Exists || !sameValues(o.Attributes, attrs) || o.Managers[replicas] != "setpoint" || o.Generation != 1 {
		t.Fatalf("read after apply: %+v", o)
	}
	if v := o.Attributes[addrs.MustPath("spec.routes")]; v.Str() != `{"weights":[1,2]}` {
		t.Fatalf("structured value: %q", v.Str())
	}
}

func mustStructured(t *testing.T, s string) values.Value {
	t.Helper()
	v, err := values.StructuredOf([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameValues(a, b map[addrs.Path]values.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestList: List through a real provider process, by kind, namespace and
// label selector, in address order; the SDK's default List says it is not
// supported.
func TestList(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	ctx := context.Background()
	var changes []providers.ObjectChange
	for _, x := range []struct{ ns, name, app string }{{"shop", "b", "web"}, {"shop", "a", "web"}, {"shop", "c", "db"}, {"other", "d", "web"}} {
		a := providers.Address{Provider: "good", Kind: "Deployment", Namespace: x.ns, Name: x.name}
		changes = append(changes, providers.ObjectChange{Address: a, Action: action.Create, Manager: "setpoint",
			Attributes: map[addrs.Path]values.Value{replicas: values.CountOf(1), appLabel: values.StringOf(x.app)}})
	}
	changes = append(changes, providers.ObjectChange{Address: providers.Address{Provider: "good", Kind: "Service", Namespace: "shop", Name: "web"},
		Action: action.Create, Manager: "setpoint", Attributes: map[addrs.Path]values.Value{appLabel: values.StringOf("web")}})
	if r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes}); len(r.Results) != len(changes) || len(r.Diagnostics) > 0 {
		t.Fatalf("apply: %+v", r)
	}
	names := func(r providers.ListResponse) string {
		var s []string
		for _, o := range r.Objects {
			s = append(s, o.Address.String())
		}
		return strings.Join(s, " ")
	}
	l := p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "good", Kind: "Deployment", Namespace: "shop", Selector: map[string]string{"app": "web"}})
	if len(l.Diagnostics) > 0 || names(l) != "good:Deployment/shop/a good:Deployment/shop/b" {
		t.Fatalf("list shop app=web: %s %v", names(l), l.Diagnostics)
	}
	if o := l.Objects[0]; o.Labels["app"] != "web" || o.Attributes[replicas] != values.CountOf(1) || !o.Exists {
		t.Fatalf("listed object: %+v", o)
	}
	l = p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "good", Kind: "Deployment"})
	if len(l.Diagnostics) > 0 || names(l) != "good:Deployment/other/d good:Deployment/shop/a good:Deployment/shop/b good:Deployment/shop/c" {
		t.Fatalf("list all: %s %v", names(l), l.Diagnostics)
	}

	b := m.Provider("basic", nil).List(ctx, providers.ListRequest{Now: time.Now(), Provider: "basic", Kind: "Deployment"})
	if len(b.Objects) != 0 || len(b.Diagnostics) != 1 || b.Diagnostics[0].Severity != providers.Error || b.Diagnostics[0].Message != "List is not supported by this provider" {
		t.Fatalf("SDK default List: %+v", b)
	}
}

// TestPlanChange: a dry run through a real provider process answers
// conflicts and the owned attributes after, and changes nothing; the
// SDK's default accepts every change.
func TestPlanChange(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	ctx := context.Background()
	a, fresh := addr("good", "owned"), addr("good", "fresh")
	if r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{set(a, 2, "kubectl")}}); r.Results[0].Err != "" {
		t.Fatalf("seed: %+v", r)
	}
	take, forced := set(a, 5, "setpoint"), set(a, 5, "setpoint")
	forced.Force = true
	create := set(fresh, 1, "setpoint")
	create.Action = action.Create
	r := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{take, forced, create}})
	if len(r.Diagnostics) > 0 || len(r.Results) != 3 {
		t.Fatalf("plan: %+v", r)
	}
	if x := r.Results[0]; x.Address != a || x.Err == "" || len(x.Conflicts) != 1 || x.Conflicts[0] != (providers.Conflict{Path: replicas, Manager: "kubectl"}) {
		t.Fatalf("unforced: %+v", x)
	}
	if x := r.Results[1]; x.Err != "" || len(x.Conflicts) != 0 || x.After[replicas] != values.CountOf(5) {
		t.Fatalf("forced: %+v", x)
	}
	if x := r.Results[2]; x.Address != fresh || x.Err != "" || x.After[replicas] != values.CountOf(1) {
		t.Fatalf("create: %+v", x)
	}
	rd := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a, fresh}})
	if o := rd.Objects[0]; o.Attributes[replicas] != values.CountOf(2) || o.Managers[replicas] != "kubectl" || rd.Objects[1].Exists {
		t.Fatalf("the dry run changed something: %+v", rd.Objects)
	}

	bp := m.Provider("basic", nil)
	br := bp.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{set(addr("basic", "x"), 7, "setpoint"), {Address: addr("basic", "y"), Action: action.Delete}}})
	if len(br.Diagnostics) > 0 || len(br.Results) != 2 || br.Results[0].Err != "" || br.Results[0].After[replicas] != values.CountOf(7) ||
		br.Results[1].Err != "" || len(br.Results[1].After) != 0 || br.Results[1].Address != addr("basic", "y") {
		t.Fatalf("SDK default PlanChange: %+v", br)
	}
}

func TestMalformedAnswersBecomeDiagnostics(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("malformed", nil)
	ctx := context.Background()
	r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("malformed", "a")}})
	all := diagText(r.Diagnostics)
	for _, want := range []string{"an object without an address", "said nothing about malformed:Deployment/shop/a", "returned malformed:Deployment/x/stranger, which was not asked for"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(r.Objects) != 1 || r.Objects[0].Exists {
		t.Errorf("objects: %+v", r.Objects)
	}
	a := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{set(addr("malformed", "a"), 1, "s"), set(addr("malformed", "b"), 1, "s")}})
	if len(a.Results) != 2 || !strings.Contains(a.Results[0].Err, "answered 1 results for 2 changes") || !strings.Contains(a.Results[1].Err, "answered 1 results") {
		t.Errorf("apply: %+v", a)
	}
	// Typed slips of a Go provider: an unset value, an empty path.
	ty := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("malformed", "typed")}})
	all = diagText(ty.Diagnostics)
	for _, want := range []string{"malformed:Deployment/shop/typed: provider malformed sent a malformed attribute: attribute spec.paused: a value of unknown type INVALID",
		"malformed attribute path: empty attribute path"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if o := ty.Objects[0]; !o.Exists || len(o.Attributes) != 1 || o.Attributes[replicas] != values.CountOf(2) {
		t.Errorf("the well-formed attribute is kept: %+v", o)
	}
	pc := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: []providers.ObjectChange{set(addr("malformed", "a"), 1, "s")}})
	if len(pc.Results) != 1 || !strings.Contains(pc.Results[0].Err, "answered a malformed result") || !strings.Contains(diagText(pc.Diagnostics), "malformed PlanChange result") {
		t.Errorf("plan with an invalid value in after: %+v", pc)
	}
	l := p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "malformed", Kind: "Deployment", Namespace: "shop", Selector: map[string]string{"app": "x"}})
	all = diagText(l.Diagnostics)
	for _, want := range []string{"listed malformed:Other/shop/wrong-kind, not of kind Deployment", "listed malformed:Deployment/elsewhere/wrong-ns, not in namespace shop",
		"listed malformed:Deployment/shop/unlabelled, whose label app does not match", "listed malformed:Deployment/shop/ok twice",
		"malformed:Deployment/shop/bad-value: provider malformed sent a malformed attribute: attribute spec.replicas"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(l.Objects) != 2 || l.Objects[0].Address.Name != "bad-value" || l.Objects[1].Address.Name != "ok" {
		t.Errorf("listed: %+v", l.Objects)
	}
	// A 70 MB answer is refused by the transport, not swallowed.
	big := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("malformed", "big")}})
	if len(big.Diagnostics) == 0 || !strings.Contains(big.Diagnostics[0].Detail, "ResourceExhausted") {
		t.Errorf("oversized: %+v", big.Diagnostics)
	}
	// A panic inside the provider fails that call only.
	pp := m.Provider("panic", nil)
	pr := pp.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("panic", "a")}})
	if len(pr.Diagnostics) == 0 || !strings.Contains(pr.Diagnostics[0].Detail, "provider panicked in Read") {
		t.Fatalf("panic: %+v", pr.Diagnostics)
	}
	if !alive(m.Pid("panic")) {
		t.Fatal("a panic in one call took the provider down")
	}
}

// TestMalformedWire: paths, typed values and addresses a Go provider
// could not even build, sent raw on the wire, become diagnostics; what is
// well formed beside them is kept.
func TestMalformedWire(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("wire", nil)
	ctx := context.Background()

	sc, diags := p.Schema(ctx)
	if len(sc.Kinds) != 1 || len(sc.Kinds[0].Attributes) != 1 || sc.Kinds[0].Attributes[0].Path != replicas || len(diags) != 3 {
		t.Errorf("schema: %+v\n%s", sc, diagText(diags))
	}

	a := addr("wire", "a")
	r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{a}})
	all := diagText(r.Diagnostics)
	for _, want := range []string{
		`malformed attribute path: attribute path "spec..bad"`,
		"attribute spec.cpu: a value of unknown type 42",
		"attribute spec.config: structured value: invalid character 'n'",
		"attribute spec.scalar: structured value: want a JSON object or list",
		`attribute spec.memory: a bytes value with text "256Mi"`,
		"attribute spec.name: a string value with the number 5",
		"attribute spec.unset: a value of unknown type INVALID",
		"attribute spec.nil: a value of unknown type INVALID",
		`manager of malformed attribute path: attribute path "spec["`,
		"sent a malformed object address; the object is ignored",
		`name "x/y"`,
		"diag with a bad address: the diagnostic's address is malformed",
		"specs/a.yaml:3:7: spec.replicas: loader-style (expected a count)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("read: missing %q in:\n%s", want, all)
		}
	}
	for _, d := range r.Diagnostics {
		if d.Message == "loader-style" && (d.Spec != "NFR/shop/a" || d.Pos.File != "specs/a.yaml" || d.Pos.Line != 3 || d.Pos.Col != 7 || d.Severity != providers.Error) {
			t.Errorf("loader-style diagnostic lost a field: %+v", d)
		}
		if d.Message == "diag with a bad address" && d.Severity != providers.Warning {
			t.Errorf("severity lost: %+v", d)
		}
	}
	if len(r.Objects) != 1 {
		t.Fatalf("read: %+v", r.Objects)
	}
	o := r.Objects[0]
	want := map[addrs.Path]values.Value{replicas: values.CountOf(3), addrs.MustPath("spec.timeout"): values.DurationOf(30 * time.Second),
		addrs.MustPath("spec.rules"): mustStructured(t, `{"a":1}`)}
	if !o.Exists || !sameValues(o.Attributes, want) || len(o.Managers) != 1 || o.Managers[replicas] != "setpoint" {
		t.Errorf("read kept: %+v", o)
	}

	l := p.List(ctx, providers.ListRequest{Now: time.Now(), Provider: "wire", Kind: "Deployment"})
	all = diagText(l.Diagnostics)
	if len(l.Objects) != 2 || l.Objects[0].Address.Name != "a" || l.Objects[1].Address.Name != "b" || l.Objects[1].Attributes[replicas] != values.CountOf(2) {
		t.Errorf("list: %+v", l.Objects)
	}
	for _, want := range []string{"sent a malformed object address; the object is ignored: no address", `address "wire:Deployment/": an empty part`, "attribute spec.cpu: a value of unknown type 42"} {
		if !strings.Contains(all, want) {
			t.Errorf("list: missing %q in:\n%s", want, all)
		}
	}

	var changes []providers.ObjectChange
	for _, n := range []string{"a", "b", "c", "d"} {
		changes = append(changes, set(addr("wire", n), 4, "setpoint"))
	}
	check := func(what string, res []providers.ObjectResult, diags []providers.Diagnostic) {
		t.Helper()
		if len(res) != 4 {
			t.Fatalf("%s: %+v", what, res)
		}
		if res[0].Err != "" || res[0].After[replicas] != values.CountOf(4) {
			t.Errorf("%s: the good result: %+v", what, res[0])
		}
		if !strings.Contains(res[1].Err, "refused") || !strings.Contains(res[1].Err, "answered a malformed result: conflict: malformed attribute path") ||
			len(res[1].Conflicts) != 1 || res[1].Conflicts[0].Manager != "kubectl" {
			t.Errorf("%s: the malformed conflict: %+v", what, res[1])
		}
		if !strings.Contains(res[2].Err, `answered a malformed result: attribute spec.replicas: a count value with text "four"`) {
			t.Errorf("%s: the malformed after: %+v", what, res[2])
		}
		if !strings.Contains(res[3].Err, "answered a malformed result: malformed attribute path: empty attribute path") {
			t.Errorf("%s: the empty path: %+v", what, res[3])
		}
		for i, r := range res {
			if r.Address != changes[i].Address {
				t.Errorf("%s: result %d is for %s", what, i, r.Address)
			}
		}
		if all := diagText(diags); strings.Count(all, "sent a malformed "+what+" result") != 3 {
			t.Errorf("%s: diagnostics:\n%s", what, all)
		}
	}
	pc := p.PlanChange(ctx, providers.PlanChangeRequest{Now: time.Now(), Changes: changes})
	check("PlanChange", pc.Results, pc.Diagnostics)
	ap := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes})
	check("Apply", ap.Results, ap.Diagnostics)

	// An event with a malformed address is dropped (and logged); the next
	// arrives.
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var got []providers.Event
	err := p.Events(ectx, time.Now(), func(e providers.Event) error {
		got = append(got, e)
		cancel()
		return nil
	})
	if err != nil || len(got) != 1 || got[0].Address != a {
		t.Errorf("events: %v %+v", err, got)
	}
}

// TestMalformedRequests: what setpoint's side sends malformed (an unset
// value, an address that does not read back, an empty path) is refused by
// the provider's side for that object only, as a diagnostic.
func TestMalformedRequests(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	ctx := context.Background()
	unset := set(addr("good", "unset"), 1, "setpoint")
	unset.Attributes[replicas] = values.Value{}
	slash := set(addr("good", "x/y"), 1, "setpoint")
	empty := set(addr("good", "empty"), 1, "setpoint")
	empty.Changed = []addrs.Path{{}}
	bad := set(addr("good", "badaction"), 1, "setpoint")
	bad.Action = action.Action(9)
	changes := []providers.ObjectChange{set(addr("good", "ok1"), 1, "setpoint"), unset, slash, set(addr("good", "ok2"), 2, "setpoint"), empty, bad}
	r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes})
	if len(r.Results) != len(changes) {
		t.Fatalf("apply: %+v", r)
	}
	for i, want := range []string{"", "a value of unknown type INVALID", `name "x/y"`, "", "changed malformed attribute path: empty attribute path", "unknown action 9"} {
		res := r.Results[i]
		if res.Address != changes[i].Address {
			t.Errorf("result %d is for %s", i, res.Address)
		}
		if (want == "") != (res.Err == "") || !strings.Contains(res.Err, want) {
			t.Errorf("result %d: want %q, got %+v", i, want, res)
		}
	}
	if all := diagText(r.Diagnostics); strings.Count(all, "setpoint sent a malformed change") != 4 {
		t.Errorf("diagnostics:\n%s", all)
	}
	rd := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("good", "ok2"), addr("good", "x/y")}})
	if o := rd.Objects[0]; o.Attributes[replicas] != values.CountOf(2) {
		t.Errorf("ok2: %+v", o)
	}
	if all := diagText(rd.Diagnostics); !strings.Contains(all, "setpoint sent a malformed address to read") || !strings.Contains(all, "said nothing about good:Deployment/shop/x/y") {
		t.Errorf("read diagnostics:\n%s", all)
	}
}

func TestNoOrphansAfterClose(t *testing.T) {
	m := manager()
	var pids []int
	for _, name := range []string{"good", "slow", "malformed", "wire"} {
		if err := m.Start(name); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, m.Pid(name))
	}
	m.Close()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("provider process %d outlived Close", pid)
		}
	}
}

func TestEventsStream(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("good", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []providers.Event
	err := p.Events(ctx, time.Now(), func(e providers.Event) error {
		got = append(got, e)
		if len(got) == 3 {
			cancel()
		}
		return nil
	})
	if err != nil || len(got) != 3 || got[0].Address.Name != "a" || got[0].Reason != "replicas changed" {
		t.Fatalf("events: %v %+v", err, got)
	}
}

// TestProviderLogsForwarded: a provider's slog lines arrive in setpoint's
// log with their level, fields and the provider's name.
func TestProviderLogsForwarded(t *testing.T) {
	var buf testutil.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	m := manager()
	defer m.Close()
	m.Provider("good", nil).Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("good", "log")}})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "asked to log") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := buf.String()
	if !strings.Contains(out, `level=WARN msg="asked to log"`) || !strings.Contains(out, "provider=good") || !strings.Contains(out, "address=good:Deployment/shop/log") {
		t.Fatalf("forwarded log:\n%s", out)
	}
}

// TestRelativePluginPathRunsTheFileChecked: with pluginPath ".", the
// provider found is the file in that directory, by its absolute path, and
// never a binary of the same name on $PATH.
func TestRelativePluginPathRunsTheFileChecked(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "setpoint-provider-local")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A decoy of the same name on $PATH.
	decoys := t.TempDir()
	if err := os.WriteFile(filepath.Join(decoys, "setpoint-provider-local"), []byte("#!/bin/sh\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", decoys+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Chdir(dir)
	m := &plugin.Manager{PluginPath: []string{"."}}
	f, err := m.Find("local")
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != exe {
		t.Fatalf("found %q, want the absolute %q", f.Path, exe)
	}
	for _, l := range m.List() {
		if l.Name == "local" && l.Path != exe {
			t.Fatalf("listed %q, want %q", l.Path, exe)
		}
	}
}

// TestSocketDirectories: a manager keeps its processes' sockets in one
// directory of its own, removes it on Close, and removes the directories of
// runs that died (their lock is free) but not those of live runs.
func TestSocketDirectories(t *testing.T) {
	base := t.TempDir()
	runs := func() []string {
		m, _ := filepath.Glob(filepath.Join(base, "setpoint-providers-*"))
		return m
	}
	dead := filepath.Join(base, "setpoint-providers-dead")
	live := filepath.Join(base, "setpoint-providers-live")
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(filepath.Join(d, "plugin-dir1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".owner"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// A run that made its directory a moment ago and has not locked it
	// yet: left alone.
	young := filepath.Join(base, "setpoint-providers-young")
	if err := os.MkdirAll(young, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(young, ".owner"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A live run: its lock is held (by an open file of this process, as
	// another process would hold it).
	f, err := os.Open(filepath.Join(live, ".owner"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	m := manager()
	m.SocketDir = base
	if err := m.Start("good"); err != nil {
		t.Fatal(err)
	}
	got := runs()
	if slices.Contains(got, dead) || !slices.Contains(got, live) || !slices.Contains(got, young) || len(got) != 3 {
		t.Fatalf("after starting: %v (want the live run's directory, the young one and a new one)", got)
	}
	own := slices.DeleteFunc(slices.Clone(got), func(d string) bool { return d == live || d == young })[0]
	if socks, _ := filepath.Glob(filepath.Join(own, "plugin*")); len(socks) == 0 {
		t.Errorf("no provider socket under %s", own)
	}
	if stray, _ := filepath.Glob(filepath.Join(base, "plugin*")); len(stray) > 0 {
		t.Errorf("sockets outside the run directory: %v", stray)
	}
	m.Close()
	if got := runs(); len(got) != 2 || !slices.Contains(got, live) || !slices.Contains(got, young) {
		t.Fatalf("after Close: %v (want only the live and the young run's)", got)
	}
}
