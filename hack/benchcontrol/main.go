// Command benchcontrol replays every scenario under a directory (make
// bench-control: testdata/scenarios) for several seeds with
// `setpoint sim --baseline --json`, prints one table of how setpoint's NFR
// control did against the world's HPA alone, the cheapest fixed replica
// count as good, and the hindsight oracle, checks the control goals on
// every row, and (with -doc) writes the table into a Markdown file between
// two marker lines. It exits 1 when a goal is missed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The goals, on every scenario and seed.
const (
	maxOver       = 5.0  // % of seconds over target, the cold start included
	maxFixedRatio = 0.85 // of the cheapest fixed count with equal or less time over
	maxOracle     = 1.3  // of the oracle's replica-hours
)

// Markers of the table in the doc.
const (
	beginMark = "<!-- bench-control:begin -->"
	endMark   = "<!-- bench-control:end -->"
)

type workload struct {
	Workload     string  `json:"workload"`
	Over         float64 `json:"overExactPct"`
	ReplicaHours float64 `json:"replicaHours"`
	Fixed        int     `json:"fixedReplicas"`
}

type summary struct {
	Workloads []workload `json:"workloads"`
	Baselines []struct {
		Name      string     `json:"name"`
		Workloads []workload `json:"workloads"`
	} `json:"baselines"`
}

// row is one scenario × seed.
type row struct {
	scenario string
	seed     int
	wall     time.Duration
	sp, hpa  workload
	fixed    workload
	oracle   float64
	missed   []string
	err      error
}

func main() {
	bin := flag.String("bin", "bin/setpoint", "the setpoint binary")
	dir := flag.String("dir", "testdata/scenarios", "directory of scenarios, one sub-directory each")
	seeds := flag.Int("seeds", 5, "seeds 1..N")
	jobs := flag.Int("jobs", 2, "replays at once")
	doc := flag.String("doc", "", "write the table into this Markdown file, between "+beginMark+" and "+endMark)
	only := flag.String("only", "", "only the scenarios of these names (comma-separated)")
	flag.Parse()
	ents, err := os.ReadDir(*dir)
	if err != nil {
		log.Fatal(err)
	}
	var rows []*row
	for _, e := range ents {
		if !e.IsDir() || *only != "" && !slices.Contains(strings.Split(*only, ","), e.Name()) {
			continue
		}
		for s := 1; s <= *seeds; s++ {
			rows = append(rows, &row{scenario: e.Name(), seed: s})
		}
	}
	next := make(chan *row)
	var wg sync.WaitGroup
	for range max(*jobs, 1) {
		wg.Go(func() {
			for r := range next {
				r.run(*bin, filepath.Join(*dir, r.scenario))
				fmt.Fprintf(os.Stderr, "%s seed %d: %s\n", r.scenario, r.seed, r.brief())
			}
		})
	}
	for _, r := range rows {
		next <- r
	}
	close(next)
	wg.Wait()
	table := render(rows)
	fmt.Print(table)
	if *doc != "" {
		if err := writeDoc(*doc, table); err != nil {
			log.Fatal(err)
		}
	}
	for _, r := range rows {
		if r.err != nil || len(r.missed) > 0 {
			os.Exit(1)
		}
	}
}

func (r *row) run(bin, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, bin, "sim", dir, "--baseline", "--json", "--seed", fmt.Sprint(r.seed))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r.wall = time.Since(start)
	if err != nil {
		r.err = fmt.Errorf("%v: %s", err, lastLine(errb.String()))
		return
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		r.err = err
		return
	}
	if len(s.Workloads) != 1 {
		r.err = fmt.Errorf("%d workloads, want 1", len(s.Workloads))
		return
	}
	r.sp = s.Workloads[0]
	for _, b := range s.Baselines {
		if len(b.Workloads) != 1 {
			continue
		}
		switch b.Name {
		case "autoscalers alone (observe)":
			r.hpa = b.Workloads[0]
		case "fixed":
			r.fixed = b.Workloads[0]
		case "oracle":
			r.oracle = b.Workloads[0].ReplicaHours
		}
	}
	r.check()
}

// check records every goal the row misses.
func (r *row) check() {
	if r.sp.Over > maxOver {
		r.missed = append(r.missed, fmt.Sprintf("over %.1f%% > %.0f%%", r.sp.Over, maxOver))
	}
	if r.sp.Over > r.hpa.Over+1e-9 {
		r.missed = append(r.missed, fmt.Sprintf("over %.1f%% > the HPA's %.1f%%", r.sp.Over, r.hpa.Over))
	}
	if r.fixed.Fixed > 0 && r.sp.ReplicaHours > maxFixedRatio*r.fixed.ReplicaHours {
		r.missed = append(r.missed, fmt.Sprintf("%.2f replica-hours > %.2f × fixed %d's %.2f", r.sp.ReplicaHours, maxFixedRatio, r.fixed.Fixed, r.fixed.ReplicaHours))
	}
	if r.oracle > 0 && r.sp.ReplicaHours > maxOracle*r.oracle {
		r.missed = append(r.missed, fmt.Sprintf("%.2f replica-hours > %.1f × the oracle's %.2f", r.sp.ReplicaHours, maxOracle, r.oracle))
	}
	if r.oracle == 0 {
		r.missed = append(r.missed, "no oracle")
	}
}

func (r *row) brief() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	s := fmt.Sprintf("%.1f%% over, %.2f replica-hours (%s)", r.sp.Over, r.sp.ReplicaHours, r.wall.Round(100*time.Millisecond))
	if len(r.missed) > 0 {
		s += "; missed: " + strings.Join(r.missed, "; ")
	}
	return s
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func render(rows []*row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | seed | setpoint over | setpoint replica-h | HPA alone over | HPA replica-h | fixed as good | oracle replica-h | ÷ oracle | ÷ HPA | ÷ fixed | goals |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(&b, "| %s | %d | error: %s |||||||||||\n", r.scenario, r.seed, r.err)
			continue
		}
		fixed := "-"
		if r.fixed.Fixed > 0 {
			fixed = fmt.Sprintf("%d pods, %.1f%%, %.2f", r.fixed.Fixed, r.fixed.Over, r.fixed.ReplicaHours)
		} else if r.fixed.Fixed < 0 {
			fixed = fmt.Sprintf("none up to %d", -r.fixed.Fixed)
		}
		goals := "met"
		if len(r.missed) > 0 {
			goals = "**missed**: " + strings.Join(r.missed, "; ")
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.2f | %.1f%% | %.2f | %s | %.2f | %s | %s | %s | %s |\n",
			r.scenario, r.seed, r.sp.Over, r.sp.ReplicaHours, r.hpa.Over, r.hpa.ReplicaHours, fixed, r.oracle,
			ratio(r.sp.ReplicaHours, r.oracle), ratio(r.sp.ReplicaHours, r.hpa.ReplicaHours), ratio(r.sp.ReplicaHours, r.fixed.ReplicaHours), goals)
	}
	return b.String()
}

// writeDoc replaces what lies between the markers in path with table.
func writeDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, beginMark), strings.Index(s, endMark)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s … %s section", path, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + table + s[j:]
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
