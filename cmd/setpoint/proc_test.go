package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/internal/testutil"
)

// proc is a long-running setpoint (watch) the test drives through its
// logs; its logs are printed when the test fails.
type proc struct {
	cmd  *exec.Cmd
	logs testutil.Buffer
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...)}
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s logs:\n%s", args[0], p.logs.String())
		}
	})
	return p
}

// waitLog waits for a line containing what.
func (p *proc) waitLog(t *testing.T, within time.Duration, what string) {
	t.Helper()
	testutil.Eventually(t, within, "log "+what, func() bool { return strings.Contains(p.logs.String(), what) })
}

// stop interrupts the process and waits for it to exit cleanly.
func (p *proc) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(t, within); err != nil {
		t.Fatalf("it did not stop cleanly: %v", err)
	}
}

// addr waits for the process to log the address it serves msg on ("serving
// health", "serving debug endpoints") and returns it: asked for port 0, it
// binds what it is given, so no port is taken between a test's choice and
// its bind.
func (p *proc) addr(t *testing.T, msg string) string {
	t.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(msg) + `" addr=(\S+)`)
	var addr string
	testutil.Eventually(t, 20*time.Second, "the address of "+msg, func() bool {
		if m := re.FindStringSubmatch(p.logs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// wait waits for the process to exit, for at most within.
func (p *proc) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("%s did not exit within %s", p.cmd.Args[1], within)
		return nil
	}
}
