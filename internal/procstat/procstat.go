// Package procstat runs a command to its end and says what it cost: the
// whole-process figures `go test -bench` cannot give (hack/measure,
// hack/benchgoals).
package procstat

import (
	"os/exec"
	"syscall"
	"time"
)

// Usage is what a finished process cost.
type Usage struct {
	Wall, CPU time.Duration // CPU: user and system
	MaxRSS    int64         // peak resident set, bytes
}

// Run runs name with args, its output discarded, and returns its usage and
// its error (an *exec.ExitError for a non-zero exit, the usage still
// measured).
func Run(name string, args ...string) (Usage, error) {
	cmd := exec.Command(name, args...)
	start := time.Now()
	err := cmd.Run()
	u := Usage{Wall: time.Since(start)}
	if cmd.ProcessState == nil {
		return u, err
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.MaxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	return u, err
}
