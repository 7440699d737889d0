package procstat

import (
	"errors"
	"os/exec"
	"testing"
)

// TestRun: a process's CPU and memory are measured, and its exit status
// comes back as the error.
func TestRun(t *testing.T) {
	u, err := Run("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err != nil || u.CPU <= 0 || u.Wall <= 0 || u.MaxRSS <= 0 {
		t.Fatalf("%+v %v", u, err)
	}
	var ee *exec.ExitError
	if _, err := Run("sh", "-c", "exit 3"); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("exit 3: %v", err)
	}
}
