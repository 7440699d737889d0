// Package simreport draws the outcome of a simulation run: one figure per
// workload comparing variants (setpoint and its baselines) over virtual
// time, and an index page that ties the figures to the comparison table.
package simreport

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/internal/confine"
)

// Series is one variant's time series for one workload, sampled every Step from Start
// (virtual time). NaN marks a point without a value (no traffic, no data).
type Series struct {
	Variant  string    // "setpoint", "HPA alone", ...
	Replicas []float64 // pods
	RPS      []float64 // requests/s arriving
	P99      []float64 // seconds: the p99 a user would see (from the histogram), trailing minute
	P99Exact []float64 // seconds: exact p99 of the trailing minute; may be nil
}

// Marker is an event of the main variant at an offset from Start.
type Marker struct {
	At      time.Duration
	Applied bool   // applied (true) or held (false)
	Text    string // one line, e.g. "minReplicas 2 → 3"
}

// Workload is everything drawn for one workload.
type Workload struct {
	Name    string        // "shop/checkout"; file names derive from it (sanitise: only [a-z0-9-], "/" → "-")
	Target  time.Duration // the p99 target; 0 when none (no target line)
	Start   time.Time
	Step    time.Duration
	Series  []Series // the first is the main variant
	Markers []Marker
}

// Report is a whole run.
type Report struct {
	Title     string
	Table     string // preformatted comparison table (plain text), shown in the index page in a <pre>
	Workloads []Workload
}

// Limits on the input. They keep one report's memory, run time and file
// sizes predictable whatever a scenario asks for.
const (
	maxPoints    = 100_000
	maxVariants  = 20
	maxWorkloads = 200

	// maxBaseLen keeps NAME.png well inside the 255-byte file name limit
	// of common filesystems.
	maxBaseLen = 120

	// maxListedEvents caps the applied events listed in the index page;
	// the figure still marks them.
	maxListedEvents = 500
)

// Write writes into dir (created if missing, mode 0o755; existing files of the same names
// overwritten; nothing else in dir touched): for each workload NAME.svg and NAME.png — one
// figure with three panels stacked vertically sharing the time axis (minutes from start):
// replicas, RPS, p99 (ms; log scale is fine; the target as a dashed horizontal line; both P99 and
// P99Exact of the main variant, only P99 for the others) — each variant a distinct colour
// with a legend; applied markers as filled triangles on the replicas panel at the main
// variant's replica value at that time, held markers as small grey crosses (held markers can be
// thousands: draw at most one per Step bucket). And index.html: the title, the table, and each
// workload's SVG embedded with <img>, plus a link to the PNG. HTML-escape every string that
// comes from input (names, variant names, table, title). Returns the list of files written.
//
// The input, and dir as Check checks it, are checked in full before
// anything is written, so a report that breaks a limit, or a directory in
// the way of a file, leaves dir untouched. If drawing or writing fails
// part-way, the files already in place are returned with the error;
// index.html is written last, so it never refers to a missing figure.
func Write(dir string, r Report) ([]string, error) {
	bases, err := validate(r)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(r.Workloads))
	for i := range r.Workloads {
		names[i] = r.Workloads[i].Name
	}
	if err := checkDir(dir, names, bases); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("simreport: %w", err)
	}

	type result struct {
		files []string
		err   error
	}
	results := make([]result, len(r.Workloads))
	// Drawing is CPU-bound and independent per workload; one worker per
	// core keeps a 200-workload report from taking minutes.
	workers := min(runtime.GOMAXPROCS(0), len(r.Workloads))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				results[i].files, results[i].err = writeFigure(dir, bases[i], &r.Workloads[i])
			}
		})
	}
	for i := range r.Workloads {
		next <- i
	}
	close(next)
	wg.Wait()

	var written []string
	var errs []error
	for _, res := range results {
		written = append(written, res.files...)
		if res.err != nil {
			errs = append(errs, res.err)
		}
	}
	if len(errs) > 0 {
		return written, syncAfter(dir, errors.Join(errs...))
	}

	page, err := indexPage(r, bases)
	if err != nil {
		return written, syncAfter(dir, err)
	}
	index := filepath.Join(dir, "index.html")
	if err := atomicfile.WriteNoDirSync(index, page, 0o644); err != nil {
		return written, syncAfter(dir, fmt.Errorf("simreport: %w", err))
	}
	written = append(written, index)
	return written, syncAfter(dir, nil)
}

// Check says whether Write could put the report of workloads with these
// names into dir, without writing anything: for a caller that makes the
// report at the end of a long run, and should refuse before the run what
// would fail after it. It checks the names as Write does (their count,
// their file names), that dir is a directory or can be made one, and that
// none of the files Write writes there is a directory.
func Check(dir string, names []string) error {
	if len(names) > maxWorkloads {
		return fmt.Errorf("simreport: %d workloads, more than the limit of %d", len(names), maxWorkloads)
	}
	bases, err := fileBases(names)
	if err != nil {
		return err
	}
	return checkDir(dir, names, bases)
}

// checkDir checks dir for Write: dir, or its nearest existing ancestor
// when it does not exist yet (MkdirAll makes the rest), must be a
// directory, and a file Write renames into place must not be a directory
// (a rename does not replace one). The names are the workloads', bases
// their file names.
func checkDir(dir string, names, bases []string) error {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				if p == dir {
					return fmt.Errorf("simreport: %s is %s, not a directory", dir, confine.Kind(fi.Mode()))
				}
				return fmt.Errorf("simreport: cannot make directory %s: %s is %s, not a directory", dir, p, confine.Kind(fi.Mode()))
			}
			if p != dir {
				return nil // made by Write; nothing in it yet
			}
			break
		}
		// ENOTDIR: a component of p is not a directory, found further up.
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("simreport: %w", err)
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
	check := func(file, what string) error {
		// Lstat: a rename replaces a symlink, whatever it points to.
		fi, err := os.Lstat(filepath.Join(dir, file))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("simreport: %w", err)
		}
		if fi.IsDir() {
			return fmt.Errorf("simreport: %s is a directory, where %s goes", filepath.Join(dir, file), what)
		}
		return nil
	}
	for i, base := range bases {
		for _, ext := range []string{".svg", ".png"} {
			if err := check(base+ext, fmt.Sprintf("the plot of workload %q", names[i])); err != nil {
				return err
			}
		}
	}
	return check("index.html", "the report's index page")
}

// syncAfter makes the renames done so far durable even when the run
// failed, so the files reported as written really are.
func syncAfter(dir string, err error) error {
	if serr := atomicfile.SyncDir(dir); serr != nil && err == nil {
		return fmt.Errorf("simreport: %w", serr)
	}
	return err
}

func writeFigure(dir, base string, w *Workload) ([]string, error) {
	svgData, pngData, err := render(w)
	if err != nil {
		return nil, fmt.Errorf("simreport: workload %q: %w", w.Name, err)
	}
	var files []string
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".svg", svgData}, {".png", pngData}} {
		path := filepath.Join(dir, base+f.ext)
		if err := atomicfile.WriteNoDirSync(path, f.data, 0o644); err != nil {
			return files, fmt.Errorf("simreport: workload %q: %w", w.Name, err)
		}
		files = append(files, path)
	}
	return files, nil
}

// validate checks every limit and returns each workload's file base name.
func validate(r Report) ([]string, error) {
	if len(r.Workloads) > maxWorkloads {
		return nil, fmt.Errorf("simreport: %d workloads, more than the limit of %d", len(r.Workloads), maxWorkloads)
	}
	names := make([]string, len(r.Workloads))
	for i := range r.Workloads {
		w := &r.Workloads[i]
		if err := validateWorkload(w); err != nil {
			return nil, err
		}
		names[i] = w.Name
	}
	return fileBases(names)
}

// fileBases names each workload's files, refusing a name without letters
// or digits and two names that would share files.
func fileBases(names []string) ([]string, error) {
	bases := make([]string, len(names))
	owner := make(map[string]string, len(names))
	for i, name := range names {
		base := fileBase(name)
		if base == "" {
			return nil, fmt.Errorf("simreport: workload name %q has no letters or digits to name its files by", name)
		}
		if prev, ok := owner[base]; ok {
			return nil, fmt.Errorf("simreport: workloads %q and %q would both be written as %s.svg/.png", prev, name, base)
		}
		owner[base] = name
		bases[i] = base
	}
	return bases, nil
}

func validateWorkload(w *Workload) error {
	if len(w.Series) > maxVariants {
		return fmt.Errorf("simreport: workload %q: %d variants, more than the limit of %d", w.Name, len(w.Series), maxVariants)
	}
	if w.Target < 0 {
		return fmt.Errorf("simreport: workload %q: negative p99 target %v", w.Name, w.Target)
	}
	n := -1
	for _, s := range w.Series {
		for _, c := range []struct {
			what     string
			v        []float64
			optional bool
		}{
			{"Replicas", s.Replicas, false},
			{"RPS", s.RPS, false},
			{"P99", s.P99, false},
			{"P99Exact", s.P99Exact, true},
		} {
			if c.optional && c.v == nil {
				continue
			}
			if len(c.v) > maxPoints {
				return fmt.Errorf("simreport: workload %q, variant %q: %s has %d points, more than the limit of %d",
					w.Name, s.Variant, c.what, len(c.v), maxPoints)
			}
			if n < 0 {
				n = len(c.v)
			} else if len(c.v) != n {
				return fmt.Errorf("simreport: workload %q, variant %q: %s has %d points where the workload's other series have %d",
					w.Name, s.Variant, c.what, len(c.v), n)
			}
		}
	}
	// Without points or markers there is nothing to place on the time
	// axis, so a missing Step is harmless there.
	if w.Step <= 0 && (n > 0 || len(w.Markers) > 0) {
		return fmt.Errorf("simreport: workload %q: Step must be positive, got %v", w.Name, w.Step)
	}
	return nil
}

// fileBase maps a workload name to [a-z0-9-]: ASCII letters lowercased,
// digits kept, and every run of anything else ("/", spaces, "<") becomes
// one "-". Mapping only ASCII keeps the result predictable across
// locales and Unicode versions.
func fileBase(name string) string {
	var b strings.Builder
	pendingDash := false
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		default:
			pendingDash = true
			continue
		}
		if pendingDash && b.Len() > 0 {
			b.WriteByte('-')
		}
		pendingDash = false
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) > maxBaseLen {
		s = strings.TrimRight(s[:maxBaseLen], "-")
	}
	return s
}

var indexTmpl = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 1.5em; color: #222; }
pre { background: #f5f5f5; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
section { margin-top: 2em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Table}}<pre>{{.Table}}</pre>
{{end}}{{if gt (len .Workloads) 1}}<ul>
{{range .Workloads}}<li><a href="#{{.Base}}">{{.Name}}</a></li>
{{end}}</ul>
{{end}}{{range .Workloads}}<section id="{{.Base}}">
<h2>{{.Name}}</h2>
<p>{{if .Target}}p99 target {{.Target}} · {{end}}{{.Variants}} · <a href="{{.PNG}}">PNG</a></p>
<img src="{{.SVG}}" alt="{{.Name}}" width="960" height="864">
{{if .Applied}}<details>
<summary>{{.AppliedCount}} applied, {{.HeldCount}} held</summary>
<ul>
{{range .Applied}}<li>+{{.At}} {{.Text}}</li>
{{end}}{{if .Unlisted}}<li>… and {{.Unlisted}} more</li>
{{end}}</ul>
</details>
{{else if .HeldCount}}<p>{{.HeldCount}} held, none applied</p>
{{end}}</section>
{{end}}</body>
</html>
`))

type indexEvent struct {
	At   time.Duration
	Text string
}

type indexWorkload struct {
	Name, Base, SVG, PNG string
	Target               string
	Variants             string
	Applied              []indexEvent
	AppliedCount         int
	HeldCount            int
	Unlisted             int
}

// indexPage renders through html/template, which escapes every input
// string for the context it lands in (text, attribute, URL).
func indexPage(r Report, bases []string) ([]byte, error) {
	data := struct {
		Title     string
		Table     string
		Workloads []indexWorkload
	}{Title: r.Title, Table: r.Table}
	if data.Title == "" {
		data.Title = "Simulation report"
	}
	for i := range r.Workloads {
		w := &r.Workloads[i]
		iw := indexWorkload{Name: w.Name, Base: bases[i], SVG: bases[i] + ".svg", PNG: bases[i] + ".png"}
		if w.Target > 0 {
			iw.Target = w.Target.String()
		}
		names := make([]string, len(w.Series))
		for j, s := range w.Series {
			names[j] = s.Variant
		}
		iw.Variants = strings.Join(names, " vs ")
		for _, m := range w.Markers {
			if !m.Applied {
				iw.HeldCount++
				continue
			}
			iw.AppliedCount++
			if len(iw.Applied) < maxListedEvents {
				iw.Applied = append(iw.Applied, indexEvent{At: m.At.Round(time.Second), Text: m.Text})
			}
		}
		iw.Unlisted = iw.AppliedCount - len(iw.Applied)
		data.Workloads = append(data.Workloads, iw)
	}
	var buf bytes.Buffer
	if err := indexTmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("simreport: index page: %w", err)
	}
	return buf.Bytes(), nil
}

// finite reports whether v can be drawn at all.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
