// Command benchgoals runs the benchmarks behind the performance goals
// (DESIGN.md, docs/benchmarks.md) and prints one table of each figure
// against its goal. It is `make bench`'s last step; it asserts nothing and
// exits 0 whatever the figures (machines are noisy: the table is for
// people).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/internal/procstat"
)

// row is one line of the table.
type row struct{ what, got, goal, verdict string }

// goal is one figure and its bound.
type goal struct {
	what   string
	pkg    string // go test package
	bench  string // -bench pattern
	times  string // -benchtime
	metric string // the benchmark's unit for the figure
	scale  float64
	unit   string
	max    float64 // the figure must be at most this
	min    float64 // or at least this (max 0)
}

var goals = []goal{
	{what: "plan of 10,000 workloads", pkg: "./engine", bench: "^BenchmarkPlan10k$", times: "3x", metric: "plan-ms", scale: 1, unit: "ms", max: 1000},
	{what: "publish of a 65,537-slot table", pkg: "./bpf/dataplane", bench: "^BenchmarkPublish$", times: "200x", metric: "publish-ms", scale: 1, unit: "ms", max: 5},
	{what: "the flip", pkg: "./bpf/dataplane", bench: "^BenchmarkPublish$", times: "200x", metric: "flip-µs", scale: 1, unit: "µs", max: 5},
	{what: "program time per connect", pkg: "./bpf/dataplane", bench: "^BenchmarkConnect$", times: "20000x", metric: "prog-ns/connect", scale: 1e-3, unit: "µs", max: 0.5},
	{what: "state save, 1% of 20,000 objects changed", pkg: "./engine/state", bench: "^BenchmarkSave1Percent$", times: "20x", metric: "ns/op", scale: 1e-6, unit: "ms", max: 50},
	{what: "watch: an edit to its apply, p50", pkg: "./cmd/setpoint", bench: "^BenchmarkWatchReaction$", times: "50x", metric: "p50-ms", scale: 1, unit: "ms", max: 100},
	{what: "watch: an edit to its apply, p99", pkg: "./cmd/setpoint", bench: "^BenchmarkWatchReaction$", times: "50x", metric: "p99-ms", scale: 1, unit: "ms", max: 300},
}

func main() {
	bin := flag.String("bin", "bin/setpoint", "the setpoint binary the whole-process figures run")
	wholeOnly := flag.Bool("whole-only", false, "only the whole-process figures (the CLI plan, validate against cue vet)")
	flag.Parse()
	if *wholeOnly {
		goals = nil
	}
	var rows []row
	ran := map[string]string{} // package+pattern → output
	for _, g := range goals {
		key := g.pkg + " " + g.bench + " " + g.times
		out, ok := ran[key]
		if !ok {
			args := []string{"test", "-run", "^$", "-bench", g.bench, "-count", "1"}
			if g.times != "" {
				args = append(args, "-benchtime", g.times)
			}
			args = append(args, g.pkg)
			fmt.Fprintf(os.Stderr, "go %s\n", strings.Join(args, " "))
			b, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n%s", key, err, b)
			}
			out = string(b)
			ran[key] = out
		}
		v, ok := metric(out, g.metric)
		if !ok {
			rows = append(rows, row{g.what, "not measured", bound(g), "?"})
			continue
		}
		v *= g.scale
		rows = append(rows, row{g.what, fmt.Sprintf("%s %s", short(v), g.unit), bound(g), verdict(g, v)})
	}
	// The demo, whole process: the median of three.
	var walls []float64
	for range 3 {
		t0 := time.Now()
		cmd := exec.Command(*bin, "sim", "--quiet", "specs/")
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "%s sim specs/: %v\n", *bin, err)
			break
		}
		walls = append(walls, time.Since(t0).Seconds())
	}
	demo := goal{what: "`setpoint sim specs/` (the demo), wall", max: 3}
	if len(walls) == 3 {
		slices.Sort(walls)
		rows = append(rows, row{demo.what, fmt.Sprintf("%s s", short(walls[1])), "≤ 3 s", verdict(demo, walls[1])})
	} else {
		rows = append(rows, row{demo.what, "not measured", "≤ 3 s", "?"})
	}
	rows = append(rows, wholeProcess(*bin)...)
	fmt.Println("| what | measured | goal | |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s |\n", r.what, r.got, r.goal, r.verdict)
	}
}

func bound(g goal) string {
	if g.min > 0 {
		return fmt.Sprintf("≥ %s %s", short(g.min), g.unit)
	}
	return fmt.Sprintf("≤ %s %s", short(g.max), g.unit)
}

func verdict(g goal, v float64) string {
	if (g.min > 0 && v >= g.min) || (g.min == 0 && v <= g.max) {
		return "met"
	}
	return "missed"
}

var benchLine = regexp.MustCompile(`^Benchmark\S*\s+\d+\s+(.*)$`)

// metric finds a unit's value in go test -bench output (the last line
// that has it).
func metric(out, unit string) (float64, bool) {
	var v float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		f := strings.Fields(m[1])
		for i := 0; i+1 < len(f); i += 2 {
			if f[i+1] != unit {
				continue
			}
			if x, err := strconv.ParseFloat(f[i], 64); err == nil {
				v, found = x, true
			}
		}
	}
	return v, found
}

// short prints a figure in three significant digits.
func short(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// run runs a command to its end and says its wall and CPU seconds and its
// peak resident set in MB.
func run(name string, args ...string) (wall, cpu, mb float64, err error) {
	u, err := procstat.Run(name, args...)
	return u.Wall.Seconds(), u.CPU.Seconds(), float64(u.MaxRSS) / (1 << 20), err
}

// wholeProcess measures the goals no go test benchmark can: the CLI plan of
// a 10,000-workload directory (wall, peak memory) and validate's CPU
// against cue vet -c's on 10,000 documents, shared and unique sections.
func wholeProcess(bin string) []row {
	tmp, err := os.MkdirTemp("", "benchgoals")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(tmp)
	gen := func(dir string, args ...string) error {
		return exec.Command("go", append([]string{"run", "./hack/gendocs", "-out", filepath.Join(tmp, dir)}, args...)...).Run()
	}
	var rows []row
	planWall, planMB := goal{what: "CLI `plan` of 10,000 workloads, wall", max: 5, unit: "s"}, goal{what: "CLI `plan` of 10,000 workloads, peak memory", max: 400, unit: "MB"}
	if err := gen("sim10000", "-sim", "-n", "10000"); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs -sim: %v\n", err)
	} else if wall, _, mb, err := run(bin, "plan", filepath.Join(tmp, "sim10000")); err != nil {
		fmt.Fprintf(os.Stderr, "%s plan: %v\n", bin, err)
	} else {
		rows = append(rows, row{planWall.what, short(wall) + " s", bound(planWall), verdict(planWall, wall)},
			row{planMB.what, short(mb) + " MB", bound(planMB), verdict(planMB, mb)})
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	cue := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "cue")
	schemas, _ := filepath.Glob("cue/schema/*.cue")
	for _, mode := range []string{"shared", "unique"} {
		g := goal{what: "`validate` CPU against `cue vet -c`, 10,000 documents, " + mode + " sections", min: 10, unit: "×"}
		args := []string{"-n", "10000"}
		if mode == "unique" {
			args = append(args, "-unique")
		}
		dir := filepath.Join(tmp, mode)
		if err := gen(mode, args...); err != nil {
			rows = append(rows, row{g.what, "not measured", bound(g), "?"})
			continue
		}
		docs, _ := filepath.Glob(filepath.Join(dir, "nfr-*.yaml"))
		_, ours, _, err1 := run(bin, "validate", dir)
		_, theirs, _, err2 := run(cue, append(append([]string{"vet", "-c", "-d", "#Spec"}, schemas...), docs...)...)
		if err1 != nil || err2 != nil || ours <= 0 {
			fmt.Fprintf(os.Stderr, "validate %s: %v; cue vet: %v\n", mode, err1, err2)
			rows = append(rows, row{g.what, "not measured", bound(g), "?"})
			continue
		}
		ratio := theirs / ours
		rows = append(rows, row{g.what, fmt.Sprintf("%s× (%s s against %s s)", short(ratio), short(ours), short(theirs)), bound(g), verdict(g, ratio)})
	}
	return rows
}
