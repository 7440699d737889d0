package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimReportCheckedBeforeTheRun: a --report that could not be written
// is refused before the simulation starts (nothing on stdout, where the
// run prints its applies), not after it.
func TestSimReportCheckedBeforeTheRun(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "report.html")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// default/fib is one of the shipped specs' workloads.
	inTheWay := filepath.Join(tmp, "report")
	if err := os.MkdirAll(filepath.Join(inTheWay, "default-fib.svg"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ report, want string }{
		{file, "--report: simreport: " + file + " is a regular file, not a directory"},
		{inTheWay, "--report: simreport: " + filepath.Join(inTheWay, "default-fib.svg") + ` is a directory, where the plot of workload "default/fib" goes`},
	} {
		out, errOut, code := runCLI(t, "sim", "specs", "--until", "2m", "--report", c.report)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("--report %s: exit %d, stderr %q; want %q", c.report, code, errOut, c.want)
		}
		if out != "" {
			t.Errorf("--report %s: the simulation ran:\n%s", c.report, out)
		}
	}
	// A directory still to be made passes the check, and gets the report.
	fresh := filepath.Join(tmp, "new", "report")
	if _, errOut, code := runCLI(t, "sim", "specs", "--until", "2m", "--quiet", "--report", fresh); code != 0 {
		t.Fatalf("--report %s: exit %d: %s", fresh, code, errOut)
	}
	for _, f := range []string{"index.html", "default-fib.svg", "default-fib.png"} {
		if _, err := os.Stat(filepath.Join(fresh, f)); err != nil {
			t.Error(err)
		}
	}
}
