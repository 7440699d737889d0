package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var binary string

// TestMain builds the real binary once: the CLI's contract (exit codes,
// stdout versus stderr) is only visible from outside the process.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "setpoint-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "setpoint")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	selfPath = binary       // in-process workspaces start providers from the real binary
	code := kubetest.Run(m) // an API server starts only for the tests that ask
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = "../.."
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestValidateSpecs(t *testing.T) {
	out, errOut, code := runCLI(t, "validate", "specs")
	if code != 0 || !strings.Contains(out, "8 documents in 8 files are valid") || errOut != "" {
		t.Fatalf("code %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestValidateErrorsGoToStderrWithExit1(t *testing.T) {
	out, errOut, code := runCLI(t, "validate", "testdata/invalid/enum.yaml", "testdata/invalid/wrong-type.yaml")
	if code != 1 || out != "" {
		t.Fatalf("want exit 1 and nothing on stdout, got %d and %q", code, out)
	}
	for _, want := range []string{
		`testdata/invalid/enum.yaml:6:27: spec.enforcement.replicas: "enforcing" is not allowed (expected one of "enforce", "observe", "off")`,
		`testdata/invalid/wrong-type.yaml:7:11: spec.paused: wrong type: "no" (expected bool)`,
		"5 errors; 0 documents in 2 files pass their schemas",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	out, _, code := runCLI(t, "validate", "--json", "testdata/invalid/out-of-range.yaml")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var r struct {
		Valid  bool
		Files  int
		Errors []struct {
			File, Path, Message, Expected string
			Line, Column                  int
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if r.Valid || r.Files != 1 || len(r.Errors) != 5 {
		t.Fatalf("got %+v", r)
	}
	e := r.Errors[0]
	if e.File != "testdata/invalid/out-of-range.yaml" || e.Line != 6 || e.Column != 24 || e.Path != "spec.throughput.minRPS" || e.Expected != ">0" {
		t.Fatalf("first error %+v", e)
	}
	out, _, code = runCLI(t, "validate", "--json", "specs")
	if code != 0 || !strings.Contains(out, `"valid": true`) || !strings.Contains(out, `"errors": []`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	out, _, code := runCLI(t, "version", "--json")
	var v struct {
		APIVersion string
		Kinds      []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.APIVersion != "setpoint.dev/v1alpha1" || strings.Join(v.Kinds, ",") != "Environment,Fleet,NFR,NodePolicy,RouteGroup,Schedule" {
		t.Fatalf("version: %d %s", code, out)
	}
	out, _, code = runCLI(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_setpoint") {
		t.Fatalf("completion: %d", code)
	}
}

func TestMissingDirectoryIsSaid(t *testing.T) {
	for _, cmd := range []string{"plan", "apply", "sim"} {
		_, errOut, code := runCLI(t, cmd, "/nonexistent/specs")
		if code != 1 || !strings.Contains(errOut, "/nonexistent/specs: no such spec directory") {
			t.Errorf("%s: %d %q", cmd, code, errOut)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"validate"}, {"validate", "--bogus", "specs"}} {
		out, errOut, code := runCLI(t, args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%v: want exit 1 and an error on stderr, got %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// --shards out of range is refused before anything starts: 0 would divide
// by zero when a spec's shard is taken.
func TestWatchShardsBounds(t *testing.T) {
	for _, n := range []string{"0", "-1", "1025"} {
		_, errOut, code := runCLI(t, "watch", "--shards", n, "specs")
		if want := "--shards " + n + ": want 1 to 1024"; code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("--shards %s: exit %d, want %q in %q", n, code, want, errOut)
		}
	}
}

// The node agent's flags: each refusal says what is missing.
func TestAgentUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "cni", "--node", "a"}, `no node agent "cni"`},
		{[]string{"agent", "nri", "--node", "a", "--cache", ""}, "--cache is required"},
		{[]string{"agent", "nri", "--node", "a", "--topology", "2x0x2"}, `topology "2x0x2"`},
		{[]string{"agent", "ebpf", "--node", ""}, "--node is required"},
		{[]string{"agent", "ebpf", "--node", "a", "--every", "1ms"}, "want every ≥ 100ms"},
		{[]string{"agent", "ebpf", "--node", "a", "--kubeconfig", "/nonexistent"}, "kubeconfig /nonexistent"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
}

func TestQuery(t *testing.T) {
	out, errOut, code := runCLI(t, "query", "--dir", "specs", "--at", "15m", `sum by (app) (rate(http_requests_total{code="200"}[1m]))`)
	if code != 0 || !strings.Contains(errOut, "# at 2023-11-16T18:30:46Z (15m0s into the trace") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], `{app="checkout"} `) || !strings.HasPrefix(lines[2], `{app="inventory"} `) || !strings.HasPrefix(lines[3], `{app="reports"} `) {
		t.Fatalf("want one line per app, got:\n%s", out)
	}
	out, _, code = runCLI(t, "query", "--dir", "specs", "--json", "--at", "2023-11-16T18:30:46Z", `sum(rate(http_requests_total[1m])) > 0`)
	var r struct {
		At      string
		Kind    string
		Samples []struct {
			Labels map[string]string
			Value  float64
		}
		NoData string
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.At != "2023-11-16T18:30:46Z" || r.Kind != "vector" || len(r.Samples) != 1 || r.Samples[0].Value <= 0 || r.NoData != "" {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, _, code = runCLI(t, "query", "--dir", "specs", `absent_metric_total`)
	if code != 0 || strings.TrimSpace(out) != "no data: no series matched" {
		t.Fatalf("no data: exit %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"query", "--dir", "specs", "sum(rate("}, "parse error"},
		{[]string{"query", "--dir", "specs", "--at", "5h", "up"}, "is outside the trace"},
		{[]string{"query", "--dir", "specs", "--at", "yesterday", "up"}, "want RFC 3339"},
		{[]string{"query", "--dir", "testdata/invalid", "up"}, "no valid Environment"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut, c.want)
		}
	}
}

func TestProvidersList(t *testing.T) {
	out, _, code := runCLI(t, "providers")
	if code != 0 || !strings.Contains(out, "sim dev (built in; signals true, events false)") || !strings.Contains(out, "  HorizontalPodAutoscaler\n    spec.minReplicas (count)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestNoProviderLeftBehind: after a command exits, its provider processes
// are gone.
func TestNoProviderLeftBehind(t *testing.T) {
	if _, _, code := runCLI(t, "sim", "--quiet", "--until", "1m", "specs"); code != 0 {
		t.Fatalf("exit %d", code)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(b), binary+"\x00provider\x00serve") {
			t.Fatalf("a provider process is still running: %s", p)
		}
	}
}

func TestUnknownProviderInEnvironment(t *testing.T) {
	dir := t.TempDir()
	env := "apiVersion: setpoint.dev/v1alpha1\nkind: Environment\nmetadata: {name: prod}\nspec:\n  providers: [{name: acme, config: {}}]\n  pluginPath: [plugins]\n"
	if err := os.WriteFile(filepath.Join(dir, "env.yaml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "plan", dir)
	real, _ := filepath.EvalSymlinks(dir)
	if code != 1 || !strings.Contains(errOut, "env.yaml:5:16: unknown provider \"acme\": not built in (ebpf, kubernetes, nri, sim) and no setpoint-provider-acme on the plugin path [] (not searched, being inside the spec directory: ["+filepath.Join(real, "plugins")+"])") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Trusted, the entry is searched.
	_, errOut, code = runCLI(t, "plan", "--allow-spec-plugins", dir)
	if code != 1 || !strings.Contains(errOut, "on the plugin path ["+filepath.Join(real, "plugins")+"]\n") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// startUntilLogged starts cmd and reads its stderr until a line holds
// every one of parts (false if it ends first); the rest is drained.
func startUntilLogged(t *testing.T, cmd *exec.Cmd, parts ...string) bool {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	found := false
	for !found && sc.Scan() {
		found = true
		for _, p := range parts {
			found = found && strings.Contains(sc.Text(), p)
		}
	}
	go io.Copy(io.Discard, stderr)
	return found
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		i := strings.LastIndexByte(string(b), ')')
		f := strings.Fields(string(b)[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, child)
		}
	}
	return out
}

// TestProvidersDieWithAKilledParent: kill -9 of watch leaves no provider
// process behind, and the next run removes the sockets it left.
func TestProvidersDieWithAKilledParent(t *testing.T) {
	dir := copySpecs(t)
	tmp := t.TempDir()
	env := append(os.Environ(), "TMPDIR="+tmp)
	cmd := exec.Command(binary, "watch", dir)
	cmd.Env = env
	// Kill it once its providers run (past their handshake), not while
	// they start.
	if !startUntilLogged(t, cmd, "msg=watching") {
		cmd.Process.Kill()
		t.Fatal("watch never said it was watching")
	}
	kids := children(cmd.Process.Pid)
	if len(kids) == 0 {
		cmd.Process.Kill()
		t.Fatal("watch started no provider process")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, k := range kids {
		for syscall.Kill(k, 0) == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k)); strings.Contains(string(b), ") Z ") {
				break // a zombie waiting for its new parent to reap it: dead
			}
			if time.Now().After(deadline) {
				syscall.Kill(k, syscall.SIGKILL)
				t.Fatalf("provider %d outlived its killed parent", k)
			}
		}
	}
	runs := func() []string {
		m, _ := filepath.Glob(filepath.Join(tmp, "setpoint-providers-*"))
		return m
	}
	left := runs()
	if len(left) != 1 {
		t.Fatalf("want the killed run's socket directory left behind, got %v", left)
	}
	// A minute on (a run's directory younger than that is never swept: its
	// owner may not have locked it yet).
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(left[0], old, old); err != nil {
		t.Fatal(err)
	}
	plan := exec.Command(binary, "plan", dir)
	// A run that starts providers sweeps (plan's own sim world runs
	// inside: this one runs it as a provider process).
	plan.Env = append(env, "SETPOINT_PROVIDERS=process")
	if out, err := plan.CombinedOutput(); err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	if left := runs(); len(left) != 0 {
		t.Fatalf("the next run left socket directories behind: %v", left)
	}
	if stray, _ := filepath.Glob(filepath.Join(tmp, "plugin*")); len(stray) > 0 {
		t.Fatalf("provider sockets outside a run directory: %v", stray)
	}
}
