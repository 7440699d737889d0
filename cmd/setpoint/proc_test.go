package main

import (
	"os"
	"os/exec"
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
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("it did not stop cleanly: %v", err)
		}
	case <-time.After(within):
		t.Fatal("it did not stop on SIGINT")
	}
}
