package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cueBomb is issue 9's 200-byte file that took validate to 4 GB.
const cueBomb = `import "list"
apiVersion: "setpoint.dev/v1alpha1"
kind: "NFR"
x: [for i in list.Range(0, 50000000, 1) {i}]
`

// cueSlow costs seconds of CPU and about 100 MB.
const cueSlow = `import "list"
apiVersion: "setpoint.dev/v1alpha1"
kind: "NFR"
x: [for i in list.Range(0, 50000, 1) {i}]
`

// specsWith is a copy of specs/ with more files in it.
func specsWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := copySpecs(t)
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// errorLines are the lines of out that report a problem in dir.
func errorLines(out, dir string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, dir) {
			lines = append(lines, strings.TrimPrefix(l, dir+"/"))
		}
	}
	return lines
}

// TestValidateBoundsCUEMemory: the bomb is an error at its file and the
// other files, YAML and CUE, are still validated.
func TestValidateBoundsCUEMemory(t *testing.T) {
	dir := specsWith(t, map[string]string{"bomb.cue": cueBomb})
	_, errOut, code := runCLI(t, "validate", "--cue-memory", "256Mi", dir)
	want := []string{"bomb.cue:1:1: evaluating this file used more than 256 MiB of memory (limit: --cue-memory)"}
	if got := errorLines(errOut, dir); code != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(errOut, "8 documents in 9 files pass their schemas") {
		t.Fatalf("exit %d, want 1 and only %q:\n%s", code, want, errOut)
	}
}

// TestValidateBoundsCUETime: the time limit stops the file being evaluated
// and the later .cue files are said to be unevaluated; YAML is unaffected.
func TestValidateBoundsCUETime(t *testing.T) {
	dir := specsWith(t, map[string]string{"a-slow.cue": cueSlow})
	start := time.Now()
	_, errOut, code := runCLI(t, "validate", "--cue-timeout", "1s", dir)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %s with a 1s limit", took)
	}
	want := []string{
		"a-slow.cue:1:1: evaluating CUE files took longer than 1s; this file was being evaluated when the time ran out (limit: --cue-timeout)",
		"fib.nfr.cue:1:1: not evaluated: CUE files had used up their 1s (limit: --cue-timeout)",
	}
	if got := errorLines(errOut, dir); code != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") || !strings.Contains(errOut, "7 documents in 9 files pass their schemas") {
		t.Fatalf("exit %d, want 1 and %q:\n%s", code, want, errOut)
	}
}

var evaluatingPid = regexp.MustCompile(`msg="evaluating CUE file" file=\S+/bomb\.cue pid=(\d+)`)

// TestValidateInterruptStopsCUE: SIGINT during a long evaluation ends
// validate at once, says so, and leaves no child process.
func TestValidateInterruptStopsCUE(t *testing.T) {
	dir := specsWith(t, map[string]string{"bomb.cue": cueBomb})
	cmd := exec.Command(binary, "--log-level", "debug", "validate", dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait for the child to say it evaluates the bomb: from then on only
	// a kill stops the evaluation.
	sc := bufio.NewScanner(stderr)
	child := 0
	for child == 0 && sc.Scan() {
		if m := evaluatingPid.FindStringSubmatch(sc.Text()); m != nil {
			child, _ = strconv.Atoi(m[1])
		}
	}
	if child == 0 {
		t.Fatal("validate never said it evaluates bomb.cue")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	done := make(chan error, 1)
	go func() {
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("validate still runs 10s after SIGINT")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	if !strings.Contains(rest.String(), "bomb.cue: interrupted before this file was checked") {
		t.Errorf("no word of the interrupt:\n%s", rest.String())
	}
	if err := syscall.Kill(child, 0); err != syscall.ESRCH {
		t.Errorf("the CUE child %d outlived validate (kill 0: %v)", child, err)
	}
}

// TestPlanBoundsCUE: plan evaluates .cue specs in the bounded child too,
// with the bound from the environment, and plans the rest.
func TestPlanBoundsCUE(t *testing.T) {
	dir := specsWith(t, map[string]string{"bomb.cue": cueBomb})
	cmd := exec.Command(binary, "plan", dir)
	cmd.Env = append(os.Environ(), "SETPOINT_CUE_MEMORY=256Mi")
	out, _ := cmd.CombinedOutput()
	want := "bomb.cue:1:1: evaluating this file used more than 256 MiB of memory (limit: SETPOINT_CUE_MEMORY)"
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "Plan:") {
		t.Fatalf("want %q and a plan:\n%s", want, out)
	}
}

func TestCUELimitsAreChecked(t *testing.T) {
	for _, args := range [][]string{{"--cue-memory", "1Mi"}, {"--cue-timeout", "0s"}, {"--cue-memory", "lots"}} {
		_, errOut, code := runCLI(t, append(append([]string{"validate"}, args...), "specs")...)
		if code != 1 || !strings.Contains(errOut, args[0]) {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}
