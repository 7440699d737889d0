package plugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"github.com/setpoint-dev/setpoint/internal/testutil"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	for _, mode := range []string{"good", "slow", "version", "malformed", "panic"} {
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

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func TestUnknownProvider(t *testing.T) {
	m := manager()
	defer m.Close()
	err := m.Start("nope")
	if err == nil || !strings.Contains(err.Error(), `unknown provider "nope"`) || !strings.Contains(err.Error(), "setpoint-provider-nope") {
		t.Fatalf("got %v", err)
	}
}

func TestVersionMismatch(t *testing.T) {
	m := manager()
	defer m.Close()
	err := m.Start("version")
	if err == nil || !strings.Contains(err.Error(), "protocol version mismatch (setpoint speaks 1)") || !strings.Contains(err.Error(), "99") {
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

// TestKilledMidApply: a provider killed with a signal in the middle of a
// batch has the whole batch reported failed; it is restarted after the
// backoff and the next call works.
func TestKilledMidApply(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("slow", nil)
	if err := m.Start("slow"); err != nil {
		t.Fatal(err)
	}
	pid := m.Pid("slow")
	done := make(chan providers.ApplyResponse, 1)
	changes := []providers.Change{{Address: addr("slow", "a"), Attribute: "spec.replicas", Value: "3"}, {Address: addr("slow", "b"), Attribute: "spec.replicas", Value: "4"}}
	go func() {
		done <- p.Apply(context.Background(), providers.ApplyRequest{Now: time.Now(), Changes: changes})
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var resp providers.ApplyResponse
	select {
	case resp = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Apply did not return after the provider died")
	}
	if len(resp.Results) != 2 {
		t.Fatalf("want both changes reported: %+v", resp)
	}
	for _, r := range resp.Results {
		if !strings.Contains(r.Err, "the batch failed") {
			t.Fatalf("a change of the dead batch was not failed: %+v", r)
		}
	}
	// Straight away: the backoff holds the restart.
	r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("slow", "a")}})
	if len(r.Diagnostics) == 0 || !strings.Contains(r.Diagnostics[0].Detail, "restarting in") {
		t.Fatalf("during backoff: %+v", r)
	}
	time.Sleep(1100 * time.Millisecond)
	if err := m.Start("slow"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if np := m.Pid("slow"); np == pid || !alive(np) {
		t.Fatalf("want a new process, got pid %d (old %d)", np, pid)
	}
}

func TestHungProviderTimesOut(t *testing.T) {
	m := manager()
	m.Timeout = 300 * time.Millisecond
	defer m.Close()
	p := m.Provider("slow", nil)
	start := time.Now()
	r := p.Read(context.Background(), providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("slow", "a")}})
	if len(r.Diagnostics) == 0 || !strings.Contains(r.Diagnostics[0].Detail, "DeadlineExceeded") {
		t.Fatalf("want a timeout: %+v", r)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the timeout took %s", el)
	}
}

func TestMalformedAnswersBecomeDiagnostics(t *testing.T) {
	m := manager()
	defer m.Close()
	p := m.Provider("malformed", nil)
	ctx := context.Background()
	r := p.Read(ctx, providers.ReadRequest{Now: time.Now(), Addresses: []providers.Address{addr("malformed", "a")}})
	var text []string
	for _, d := range r.Diagnostics {
		text = append(text, d.Summary)
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"an object without an address", "said nothing about malformed:Deployment/shop/a", "returned malformed:Deployment/x/stranger, which was not asked for"} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in:\n%s", want, all)
		}
	}
	if len(r.Objects) != 1 || r.Objects[0].Exists {
		t.Errorf("objects: %+v", r.Objects)
	}
	a := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.Change{{Address: addr("malformed", "a")}, {Address: addr("malformed", "b")}}})
	if len(a.Results) != 2 || !strings.Contains(a.Results[0].Err, "answered 1 results for 2 changes") {
		t.Errorf("apply: %+v", a)
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

func TestNoOrphansAfterClose(t *testing.T) {
	m := manager()
	var pids []int
	for _, name := range []string{"good", "slow", "malformed"} {
		if err := m.Start(name); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, m.Pid(name))
	}
	m.Close()
	deadline := time.Now().Add(3 * time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
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
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(buf.String(), "asked to log") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := buf.String()
	if !strings.Contains(out, `level=WARN msg="asked to log"`) || !strings.Contains(out, "provider=good") || !strings.Contains(out, "address=good:Deployment/shop/log") {
		t.Fatalf("forwarded log:\n%s", out)
	}
}
