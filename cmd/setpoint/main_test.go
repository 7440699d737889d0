package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	code := m.Run()
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
	if code != 0 || !strings.Contains(out, "4 documents in 4 files are valid") || errOut != "" {
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
		"5 errors; 0 valid documents in 2 files",
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
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.APIVersion != "setpoint.dev/v1alpha1" || strings.Join(v.Kinds, ",") != "Environment,NFR" {
		t.Fatalf("version: %d %s", code, out)
	}
	out, _, code = runCLI(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_setpoint") {
		t.Fatalf("completion: %d", code)
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
