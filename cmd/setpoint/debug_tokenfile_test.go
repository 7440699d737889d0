package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// tokenResult is what readDebugToken returned, handed over from the
// goroutine that ran it.
type tokenResult struct {
	tok []byte
	err error
}

// readTokenWithin reads a token file in a goroutine, failing the test
// when the read does not return within the deadline (the hang this
// guards against: an open that waits on a FIFO's writer).
func readTokenWithin(t *testing.T, path string) ([]byte, error) {
	t.Helper()
	done := make(chan tokenResult, 1)
	go func() {
		tok, err := readDebugToken(path)
		done <- tokenResult{tok, err}
	}()
	select {
	case r := <-done:
		return r.tok, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s did not return", path)
		return nil, nil
	}
}

// TestDebugTokenFileKinds: only a regular file not readable by every user
// is a token file, judged by what was opened (through symlinks, as a
// Secret volume lays its files out).
func TestDebugTokenFileKinds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, perm os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("tok\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		// Chmod, as WriteFile's mode is cut by the umask.
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A Secret volume: token -> ..data/token, ..data -> ..2024_01_01, the
	// file itself 0440 when the pod has an fsGroup.
	secret := filepath.Join(dir, "secret")
	if err := os.MkdirAll(filepath.Join(secret, "..2024_01_01"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("secret/..2024_01_01/token", 0o440)
	if err := os.Symlink("..2024_01_01", filepath.Join(secret, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/token", filepath.Join(secret, "token")); err != nil {
		t.Fatal(err)
	}
	// A link is 0777 itself: the file it leads to is what is judged.
	if err := os.Symlink(write("world", 0o644), filepath.Join(dir, "link-to-world")); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, path string
		refused    string // "" for read
	}{
		{"owner only", write("owner", 0o600), ""},
		{"group-readable", write("group", 0o640), ""},
		{"a Secret's symlinks, fsGroup", filepath.Join(secret, "token"), ""},
		{"world-readable", filepath.Join(dir, "world"), "readable by every user (mode 0644)"},
		{"a link to a world-readable file", filepath.Join(dir, "link-to-world"), "readable by every user"},
		{"a FIFO", fifo, "a named pipe (FIFO), not a regular file"},
		{"a directory", dir, "a directory, not a regular file"},
		{"a character device", os.DevNull, "a character device, not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok, err := readTokenWithin(t, c.path)
			switch {
			case c.refused == "" && (err != nil || string(tok) != "tok"):
				t.Fatalf("got %q, %v", tok, err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "--debug-token-file "+c.path)):
				t.Fatalf("got %v, want refused with %q", err, c.refused)
			}
		})
	}
}

// TestDebugTokenFIFOWatchExits: the real watch given a FIFO as its token
// file exits with an error saying so, rather than wait in the open for a
// writer (where SIGTERM did not reach it either).
func TestDebugTokenFIFOWatchExits(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "watch", "--debug-addr", "127.0.0.1:0", "--debug-token-file", fifo, t.TempDir())
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch hangs on a FIFO as its token file")
	}
	if want := "--debug-token-file " + fifo + ": a named pipe (FIFO), not a regular file"; !strings.Contains(p.logs.String(), want) {
		t.Fatalf("want %q in:\n%s", want, p.logs.String())
	}
}

// TestHealthAddrServesMetrics: with --health-addr and no debug server,
// /metrics is served there, counting what the watch does.
func TestHealthAddrServesMetrics(t *testing.T) {
	dir := copySpecs(t)
	start := time.Now()
	w := startProc(t, "watch", "--health-addr", "127.0.0.1:0", dir)
	addr := w.addr(t, "serving health")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The start's reconcile applies fib's scale-to-zero bound.
	var metrics string
	testutil.Eventually(t, 20*time.Second, "an apply counted on /metrics", func() bool {
		code, body := get("/metrics")
		metrics = body
		v, _ := metricValue(body, `setpoint_applies_total{result="ok"}`)
		// The reconcile is counted when it ends, after its applies.
		done, _ := metricValue(body, `setpoint_reconciles_total{result="ok"}`)
		return code == 200 && v >= 1 && done >= 1
	})
	for _, series := range []string{`setpoint_reconcile_duration_seconds_count`, `setpoint_provider_call_duration_seconds_count{method="Read",provider="sim"}`, `go_goroutines`} {
		if _, ok := metricValue(metrics, series); !ok {
			t.Errorf("no %s in:\n%s", series, metrics)
		}
	}
	specs := 0
	yamls, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	cues, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
	for _, f := range append(yamls, cues...) {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "kind: Environment") {
			specs++
		}
	}
	for series, want := range map[string]float64{
		"setpoint_specs": float64(specs), "setpoint_specs_incomplete": 0, "setpoint_tick_seconds": 5, // specs/setpoint.yaml's
		"setpoint_shards": 0, "setpoint_shards_owned": 0, `setpoint_reconciles_total{result="failed"}`: 0,
	} {
		if v, ok := metricValue(metrics, series); !ok || v != want {
			t.Errorf("%s = %v (served: %v), want %v", series, v, ok, want)
		}
	}
	if v, _ := metricValue(metrics, "setpoint_last_reconcile_success_timestamp_seconds"); v < float64(start.Unix()) {
		t.Errorf("setpoint_last_reconcile_success_timestamp_seconds = %v after a good reconcile, want at least the test's start %d", v, start.Unix())
	}
	// A broken edit keeps the last good version running: only the gauge
	// (and the SetpointSpecBroken alert on it) says so.
	if err := os.WriteFile(filepath.Join(dir, "checkout.nfr.yaml"), []byte("kind: NFR\nspec: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "a broken spec file counted on /metrics", func() bool {
		_, body := get("/metrics")
		metrics = body
		v, _ := metricValue(body, "setpoint_specs_incomplete")
		return v == 1
	})
	if v, _ := metricValue(metrics, "setpoint_specs"); v != float64(specs) {
		t.Errorf("setpoint_specs = %v with one file broken, want its last good version kept: %d", v, specs)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	// The debug endpoints stay off.
	if code, _ := get("/debug/store"); code != 404 {
		t.Errorf("/debug/store on the health address: %d", code)
	}
	w.stop(t, 10*time.Second)
}
