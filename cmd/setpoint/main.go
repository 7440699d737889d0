// Command setpoint reconciles run-time capacity with declared specs.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/internal/memlimit"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// limitMemory keeps the heap of a long-running process (watch, an agent)
// under its container's memory limit (GOMEMLIMIT, when set, wins): one-shot
// commands end before a limit would matter.
func limitMemory() {
	n, why, err := memlimit.Set(os.DirFS("/"), os.Getenv, memlimit.DefaultRatio)
	switch {
	case err != nil:
		slog.Warn("no Go memory limit from the cgroup", "error", err)
	case n > 0:
		slog.Debug("Go memory limit from the cgroup", "bytes", n)
	default:
		slog.Debug("no Go memory limit from the cgroup", "why", why)
	}
}

// profileCPU writes a CPU profile of this process to the file
// $SETPOINT_CPUPROFILE names, with the process id appended (a provider
// process started from this one writes its own), and with it a heap profile
// at the end to $SETPOINT_MEMPROFILE's: for a user measuring where a large
// directory's plan spends its time and memory.
func profileCPU() (stop func()) {
	path := os.Getenv("SETPOINT_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err != nil {
		slog.Warn("no CPU profile", "error", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		slog.Warn("no CPU profile", "error", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if mp := os.Getenv("SETPOINT_MEMPROFILE"); mp != "" {
			// What is held at the end (the world, the store, the plan):
			// the peak's large parts.
			if m, err := os.Create(fmt.Sprintf("%s.%d", mp, os.Getpid())); err == nil {
				_ = pprof.Lookup("heap").WriteTo(m, 0)
				m.Close()
			}
		}
	}
}

// errSilent marks an error whose details were already printed (for example
// validation diagnostics); main only sets the exit code.
var errSilent = errors.New("failed")

func run(args []string) int {
	defer profileCPU()()
	// An interrupt cancels the command's context, so it stops its provider
	// processes and releases the state lock on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, errChanges) {
			return 2
		}
		if !errors.Is(err, errSilent) {
			// An error may list things on lines of its own; within a line,
			// a terminal escape or a bidi control from a file name or a
			// value is shown, not obeyed.
			lines := strings.Split(err.Error(), "\n")
			for i, l := range lines {
				lines[i] = diag.Escape(l)
			}
			fmt.Fprintln(root.ErrOrStderr(), "error:", strings.Join(lines, "\n"))
		}
		return 1
	}
	return 0
}
