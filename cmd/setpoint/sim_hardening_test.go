package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/providers"
)

// oneLineError fails unless stderr is one "error: " line holding want,
// with no Go runtime output.
func oneLineError(t *testing.T, what string, code int, stderr, want string) {
	t.Helper()
	if code != 1 || !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) ||
		strings.Contains(stderr, "goroutine") || strings.Contains(stderr, "panic") {
		t.Errorf("%s: exit %d, stderr %q; want exit 1 and one error line containing %q", what, code, stderr, want)
	}
}

// TestSimFlagsAreValidated: the sim command's flags are checked as the
// schema checks the Environment's fields; --until past the trace says
// where the trace ends.
func TestSimFlagsAreValidated(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--rate-scale", "-3"}, "--rate-scale must be in (0, 1e6], got -3"},
		{[]string{"--rate-scale", "0"}, "--rate-scale must be in (0, 1e6], got 0"},
		{[]string{"--rate-scale", "1e9"}, "--rate-scale must be in (0, 1e6], got 1e+09"},
		{[]string{"--rate-scale", "NaN"}, "--rate-scale must be in (0, 1e6], got NaN"},
		{[]string{"--speed", "NaN"}, "--speed must be a finite number ≥ 0, got NaN"},
		{[]string{"--speed", "-1"}, "--speed must be a finite number ≥ 0, got -1"},
		{[]string{"--speed", "+Inf"}, "--speed must be a finite number ≥ 0, got +Inf"},
	} {
		args := append([]string{"sim", "--quiet", "--until", "1m"}, c.flags...)
		_, errOut, code := runCLI(t, append(args, "specs")...)
		oneLineError(t, strings.Join(c.flags, " "), code, errOut, c.want)
	}
	for _, c := range []struct{ until, want string }{
		{"5h", "--until 5h is after the end of the trace: it ends at 2023-11-16T19:14:09Z, 58m23s from its start"},
		{"2023-11-17T00:00:00Z", "--until 2023-11-17T00:00:00Z is after the end of the trace: it ends at 2023-11-16T19:14:09Z"},
		{"0s", "--until 0s is not after the trace's start (2023-11-16T18:15:46Z)"},
		{"2023-11-16T18:00:00Z", "--until 2023-11-16T18:00:00Z is not after the trace's start"},
	} {
		_, errOut, code := runCLI(t, "sim", "--quiet", "--until", c.until, "specs")
		oneLineError(t, "--until "+c.until, code, errOut, c.want)
	}
	// The end itself is allowed.
	if _, errOut, code := runCLI(t, "sim", "--quiet", "--until", "2023-11-16T18:16:46Z", "specs"); code != 0 {
		t.Errorf("--until inside the trace: %d %s", code, errOut)
	}
}

// TestSimTraceBounds: a trace that would expand past the bounds, or is not
// a regular file, is a one-line error from every command that loads it.
func TestSimTraceBounds(t *testing.T) {
	specs := copySpecs(t, [3]string{"setpoint.yaml", "traces/azure-llm-conv-2023.csv", "traces/century.csv"})
	century := filepath.Join(specs, "traces", "century.csv")
	if err := os.WriteFile(century, []byte("TIMESTAMP\n1923-11-16 18:15:46\n2023-11-16 18:15:46\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		trace, want string
	}{
		{century, "a trace may span at most 31 days"},
		{"/dev/zero", "/dev/zero is not a regular file"},
	} {
		_, errOut, code := runCLI(t, "sim", "--quiet", "--trace", c.trace, "specs")
		oneLineError(t, c.trace, code, errOut, c.want)
	}
	for _, cmd := range [][]string{{"plan", specs}, {"query", "--dir", specs, "up"}} {
		_, errOut, code := runCLI(t, cmd...)
		oneLineError(t, cmd[0], code, errOut, "a trace may span at most 31 days")
	}
}

// TestSimConcurrentAppliesAgree: six applies at once, each waiting for
// the state lock, on one directory, without cooldowns, so each apply plans
// the next bounded step of what the one before it did. Each provider
// process loads the sim world when it starts, before it waits; it must
// catch up with the sim state file another one changed since, or it plans
// from a stale world, applies a step again and writes over the others'
// changes. Afterwards no step was applied twice, setpoint's state and the
// sim world agree, and the sim state file holds what was reported applied.
func TestSimConcurrentAppliesAgree(t *testing.T) {
	dir := copySpecs(t, append(quick,
		[3]string{"checkout.nfr.yaml", "cooldown: 2m", "cooldown: 0s"},
		[3]string{"inventory.nfr.yaml", "safety: {stability: 0s}", "safety: {stability: 0s, cooldown: 0s}"})...)
	const n = 6
	var wg sync.WaitGroup
	codes := make([]int, n)
	outs, errs := make([]string, n), make([]string, n)
	start := make(chan struct{})
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := exec.Command(binary, "apply", "--auto-approve", "--lock-timeout", "60s", dir)
			var o, e strings.Builder
			cmd.Stdout, cmd.Stderr = &o, &e
			<-start
			err := cmd.Run()
			if ee, ok := err.(*exec.ExitError); ok {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i] = -1
			}
			outs[i], errs[i] = o.String(), e.String()
		}(i)
	}
	close(start)
	wg.Wait()
	applied := 0
	complete := regexp.MustCompile(`Apply complete: (\d+) applied, 0 failed`)
	step := regexp.MustCompile(`^    (\S+): (\S+) → (\S+)   \(`)
	created := regexp.MustCompile(`^    (\S+): [^→]+$`)
	steps := map[string]int{}
	for i, c := range codes {
		m := complete.FindStringSubmatch(outs[i])
		if c != 0 || m == nil {
			t.Fatalf("apply %d: exit %d\n%s\n%s", i, c, outs[i], errs[i])
		}
		k, _ := strconv.Atoi(m[1])
		applied += k
		object := ""
		for _, line := range strings.Split(outs[i], "\n") {
			if strings.HasPrefix(line, "~ ") || strings.HasPrefix(line, "+ ") || strings.HasPrefix(line, "held: ") {
				object = line
			}
			if m := step.FindStringSubmatch(line); m != nil && !strings.HasPrefix(object, "held: ") {
				steps[object+" "+m[1]+" "+m[2]+" → "+m[3]]++
			} else if m := created.FindStringSubmatch(line); m != nil && strings.HasPrefix(object, "+ ") {
				// An object created with its value (a route group's config).
				steps[object+" "+m[1]]++
			}
		}
	}
	for s, k := range steps {
		if k > 1 {
			t.Errorf("applied %d times: %s", k, s)
		}
	}
	if len(steps) != applied || applied < 4 {
		t.Fatalf("%d applied, %d distinct steps:\n%s", applied, len(steps), strings.Join(outs, "\n"))
	}
	// The sim world recorded every applied step, once.
	b, err := os.ReadFile(filepath.Join(dir, ".setpoint", "sim-state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sf struct {
		Changes []struct {
			Changed []string
		}
	}
	if err := json.Unmarshal(b, &sf); err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for _, c := range sf.Changes {
		recorded += len(c.Changed)
	}
	if recorded != applied {
		t.Errorf("the sim world recorded %d attribute changes, the applies reported %d:\n%s", recorded, applied, b)
	}
	// Every value setpoint's state says it applied is the world's.
	st, err := state.NewFile(filepath.Join(dir, ".setpoint", "state.json")).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := openWorkspace(dir, simOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.close()
	claimed := 0
	for _, o := range st.Objects() {
		obj, _ := st.Object(o)
		r := ws.providers["sim"].Read(context.Background(), providers.ReadRequest{Now: ws.now, Addresses: []providers.Address{o}})
		if len(r.Objects) != 1 {
			t.Fatalf("%s: %+v", o, r)
		}
		for path, e := range obj.Attrs {
			if e.Applied == nil {
				continue
			}
			claimed++
			if got := r.Objects[0].Attributes[addrs.MustPath(path)]; got != e.Applied.Value {
				t.Errorf("%s %s: state says %s was applied, the world has %s", o, path, e.Applied.Value, got)
			}
		}
	}
	if claimed == 0 {
		t.Error("the state claims no applied value")
	}
	// Six rounds are more than the bounded steps need: the next plan has
	// nothing left to do, and says so twice alike.
	out1, errOut, code := runCLI(t, "plan", "--detailed-exitcode", dir)
	out2, _, _ := runCLI(t, "plan", "--detailed-exitcode", dir)
	if code != 0 || out1 != out2 {
		t.Errorf("plan after the applies: exit %d %s\n%s\n---\n%s", code, errOut, out1, out2)
	}
}

// TestSimProviderCrashFailsTheRun: sim --provider-process runs on a fresh
// world kept only by its provider process; when that process dies the world
// is lost, and sim fails saying so instead of carrying on with a new, empty
// world.
func TestSimProviderCrashFailsTheRun(t *testing.T) {
	dir := copySpecs(t, quick...)
	// Paced (50 virtual minutes at 300×: 10 s) so it is still running when
	// the provider is killed.
	cmd := exec.Command(binary, "sim", "--provider-process", "--speed", "300", "--until", "50m", dir)
	pr, pw := io.Pipe()
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = pw, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// The first apply proves the provider serves the world.
	sc := bufio.NewScanner(pr)
	var out strings.Builder
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "] ~ sim:") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	var provider int
	for _, k := range children(cmd.Process.Pid) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline"); strings.HasPrefix(string(b), binary+"\x00provider\x00serve\x00sim") {
			provider = k
		}
	}
	if provider == 0 {
		t.Fatalf("no sim provider process under sim (pid %d); stdout:\n%s", cmd.Process.Pid, out.String())
	}
	if err := syscall.Kill(provider, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	code := 0
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	case <-time.After(60 * time.Second):
		t.Fatal("sim did not end after its provider was killed")
	}
	msg := stderr.String()
	if code != 1 || !regexp.MustCompile(`error: the sim provider exited at virtual time 2023-11-16T\S+ \(\S+ into the trace\): the world it simulated, with the changes applied to it, is lost`).MatchString(msg) {
		t.Fatalf("exit %d, stderr:\n%s", code, msg)
	}
}
