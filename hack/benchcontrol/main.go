// Command benchcontrol replays every scenario under a directory (make
// bench-control: testdata/scenarios) for several seeds with
// `setpoint sim --baseline --json`, prints one table of how setpoint's NFR
// control did against the world's HPA alone, the cheapest fixed replica
// count as good, and the hindsight oracle, checks the control goals on
// every row (internal/controlgoals), and (with -doc) writes the table into
// a Markdown file between two marker lines. It exits 1 when a replay
// fails, and with -strict when a goal is missed.
package main

import (
	"bytes"
	"context"
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

	"github.com/setpoint-dev/setpoint/internal/controlgoals"
)

// Markers of the table in the doc.
const (
	beginMark = "<!-- bench-control:begin -->"
	endMark   = "<!-- bench-control:end -->"
)

// row is one scenario × seed.
type row struct {
	scenario string
	seed     int
	wall     time.Duration
	controlgoals.Row
	missed []string
	err    error
}

func main() {
	bin := flag.String("bin", "bin/setpoint", "the setpoint binary")
	dir := flag.String("dir", "testdata/scenarios", "directory of scenarios, one sub-directory each")
	seeds := flag.Int("seeds", 5, "seeds 1..N")
	jobs := flag.Int("jobs", 2, "replays at once")
	strict := flag.Bool("strict", false, "exit 1 when a run misses a goal (it always does when a run fails)")
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
	if len(rows) == 0 {
		log.Fatalf("no scenario in %s matches", *dir)
	}
	table := render(rows)
	fmt.Print(table)
	failed := slices.ContainsFunc(rows, func(r *row) bool { return r.err != nil })
	switch {
	case *doc == "":
	case failed:
		// A table with failed runs would replace good figures with
		// errors: the doc keeps what it had.
		log.Printf("%s not written: a replay failed", *doc)
	default:
		if err := writeDoc(*doc, table); err != nil {
			log.Fatal(err)
		}
	}
	for _, r := range rows {
		if r.err != nil || *strict && len(r.missed) > 0 {
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
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("timed out after %s", r.wall.Round(time.Second))
		return
	case err != nil:
		r.err = fmt.Errorf("%v: %s", err, lastLine(errb.String()))
		return
	}
	if r.Row, err = controlgoals.Read(out.Bytes(), ""); err != nil {
		r.err = err
		return
	}
	g, ok := controlgoals.Goals[r.scenario]
	if !ok {
		r.missed = append(r.missed, "no goals for this scenario in internal/controlgoals")
	}
	for _, m := range r.Missed(g) {
		r.missed = append(r.missed, m.Text)
	}
}

func (r *row) brief() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	s := fmt.Sprintf("%.1f%% over, %.2f replica-hours (%s)", r.Setpoint.OverPct, r.Setpoint.ReplicaHours, r.wall.Round(100*time.Millisecond))
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
	b.WriteString("| scenario | seed | setpoint: over, replica-h | setpoint defaults | HPA alone | cheapest fixed as good | oracle | reactive bound at setpoint's over | ÷ oracle | ÷ reactive | ÷ fixed | goals |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	met := 0
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(&b, "| %s | %d | error: %s ||||||||||\n", r.scenario, r.seed, strings.NewReplacer("|", "\\|", "\n", " ").Replace(r.err.Error()))
			continue
		}
		sp, h := r.Setpoint, r.HPA
		fixed, fixedRatio := "-", "-"
		switch f := r.Fixed; {
		case f.Fixed > 0:
			fixed = fmt.Sprintf("%d pods: %.1f%%, %.2f", f.Fixed, f.OverPct, f.ReplicaHours)
			fixedRatio = ratio(sp.ReplicaHours, f.ReplicaHours)
		case f.Fixed < 0:
			fixed = fmt.Sprintf("none up to %d", -f.Fixed)
		}
		def := "-" // the spec opts in to nothing
		if d := r.Default; d != nil {
			def = fmt.Sprintf("%.1f%%, %.2f", d.OverPct, d.ReplicaHours)
		}
		bound, boundRatio := "none", "-"
		if v, ok := r.ReactiveAt(sp.OverPct); ok {
			bound, boundRatio = fmt.Sprintf("%.2f", v), ratio(sp.ReplicaHours, v)
		}
		goals := "met"
		if len(r.missed) > 0 {
			goals = "missed: " + strings.Join(r.missed, "; ")
		} else {
			met++
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f%%, %.2f | %s | %.1f%%, %.2f | %s | %.2f | %s | %s | %s | %s | %s |\n",
			r.scenario, r.seed, sp.OverPct, sp.ReplicaHours, def, h.OverPct, h.ReplicaHours, fixed, r.Oracle,
			bound, ratio(sp.ReplicaHours, r.Oracle), boundRatio, fixedRatio, goals)
	}
	fmt.Fprintf(&b, "\nGoals met on %d of %d runs.\n", met, len(rows))
	return b.String()
}

// writeDoc replaces what lies between the markers in path with table,
// through a file beside it renamed over it (the file keeps its mode).
func writeDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i := strings.Index(s, beginMark)
	j := strings.Index(s, endMark)
	if i < 0 || j < i || strings.Count(s, beginMark) != 1 || strings.Count(s, endMark) != 1 {
		return fmt.Errorf("%s: want one %s … %s section", path, beginMark, endMark)
	}
	s = s[:i+len(beginMark)] + "\n" + table + s[j:]
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".bench-control-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(fi.Mode().Perm()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
