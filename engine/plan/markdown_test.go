package plan

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
)

var update = flag.Bool("update", false, "rewrite testdata/*.md")

// mdSample is sample() with a second spec (a create and a release), a
// note and an error.
func mdSample() *Plan {
	p := sample()
	p.Changes[0].Spec, p.Changes[0].Reason = "NFR/shop/checkout", "ceil((1200/600) × (600m/500m)) = 3"
	p.Held[0].Spec, p.Held[0].By = "NFR/shop/checkout", []string{"NFR/shop/checkout"}
	hpa := addrs.Object{Provider: "kubernetes", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "api"}
	min := addrs.MustPath("spec.minReplicas")
	p.Changes = append(p.Changes,
		Change{Address: hpa, Attribute: min, Action: action.Create, To: "2", Value: values.CountOf(2), Spec: "Schedule/shop/api",
			Create: map[addrs.Path]values.Value{min: values.CountOf(2)}, Reason: "atStart 2"},
		Change{Address: addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: "shop", Name: "old"}, Attribute: addrs.MustPath("spec.replicas"),
			Action: action.Update, Release: true, From: "4", To: "4", Value: values.CountOf(4), By: []string{"NFR/shop/old"}, Spec: "NFR/shop/old", Reason: "NFR/shop/old gone"})
	p.Notes = []Note{{Severity: diag.Warning, Spec: "NFR/shop/checkout", Message: "container app: no memory recommendation"}}
	p.Errors = []Note{{Severity: diag.Error, Spec: "NFR/shop/broken", Message: "reading kubernetes:Deployment/shop/broken: forbidden"}}
	return p
}

// The Markdown plan, against its golden file: a summary, each spec in a
// collapsible section as a diff block, then the notes and errors.
func TestMarkdownGolden(t *testing.T) {
	var b strings.Builder
	if err := mdSample().Markdown(&b, 0); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "plan.md")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("the Markdown plan differs from %s (go test -update to rewrite it):\n%s", path, b.String())
	}
}

// A plan longer than max is cut between specs, never inside one, with a
// notice counting what was left out; it never exceeds max.
func TestMarkdownBounded(t *testing.T) {
	p := sample()
	p.Held = nil
	base := p.Changes[0]
	p.Changes = nil
	for i := range 200 {
		c := base
		c.Spec = "NFR/shop/w" + strings.Repeat("x", 3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		p.Changes = append(p.Changes, c)
	}
	for i := range 500 {
		p.Notes = append(p.Notes, Note{Severity: diag.Warning, Message: strings.Repeat("n", 80) + string(rune('a'+i%26))})
	}
	for _, max := range []int{2000, 10000} {
		var b strings.Builder
		if err := p.Markdown(&b, max); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(out) > max {
			t.Errorf("max %d: %d bytes", max, len(out))
		}
		if !strings.Contains(out, "more specs, not shown") || !strings.Contains(out, "more notes, not shown") {
			t.Errorf("max %d: no truncation notices:\n%s", max, out)
		}
		if strings.Count(out, "<details>") != strings.Count(out, "</details>") || strings.Count(out, "<details>") == 0 {
			t.Errorf("max %d: a section cut in two:\n%s", max, out)
		}
	}
}

// Text from the cluster cannot close its code block or open HTML: the
// fence outgrows any run of backticks in it, and spec names are escaped.
func TestMarkdownFencesWhatItQuotes(t *testing.T) {
	p := sample()
	p.Changes[0].Spec = "NFR/shop/<b>x</b>"
	p.Changes[0].Reason = "```\n<script>alert(1)</script>\n````"
	var b strings.Builder
	if err := p.Markdown(&b, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "`````diff\n") || strings.Contains(out, "<b>x</b>") || !strings.Contains(out, "&lt;b&gt;x&lt;/b&gt;") {
		t.Fatalf("quoted text not fenced or escaped:\n%s", out)
	}
}

// forged is a spec file's name that, written as it is, would add two
// changes to a comment's diff block, in green.
const forged = "inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml"

// changeLines are the lines of a plan's output a diff block colours as
// changes.
func changeLines(out string) []string {
	var lines []string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "+") || strings.HasPrefix(l, "-") || strings.HasPrefix(l, "~") {
			lines = append(lines, l)
		}
	}
	return lines
}

// unseen is the first character of out, but for its newlines, that must
// never reach a screen as it is: a C0 or C1 control or DEL, a bidi or
// other invisible format character, a line or paragraph separator, a tag
// character, or a byte that is not UTF-8. The list is written out here,
// not taken from the code under test.
func unseen(out string) (rune, bool) {
	if !utf8.ValidString(out) {
		return utf8.RuneError, true
	}
	never := [][2]rune{{0, 0x09}, {0x0b, 0x1f}, {0x7f, 0x9f}, {0x061c, 0x061c}, {0x200b, 0x200f}, {0x2028, 0x202e}, {0x2060, 0x2069}, {0xfeff, 0xfeff}, {0xe0000, 0xe007f}}
	for _, r := range out {
		for _, span := range never {
			if r >= span[0] && r <= span[1] {
				return r, true
			}
		}
	}
	return 0, false
}

// forgedPlan is sample() with a spec, a position, a reason, a hold and
// notes that carry forged lines, bidi overrides and terminal escapes.
func forgedPlan() *Plan {
	p := sample()
	p.Changes[0].Spec, p.Changes[0].SpecPos, p.Changes[0].Reason = forged, forged, forged
	p.Changes[0].From = "2\x1b[2K\r+ sim:Deployment/prod/payments"
	p.Held[0].Spec = "NFR/shop/\u202eyaml.exe"
	p.Held[0].Held = &Hold{Kind: HoldPaused, Detail: forged + "\u202e"}
	p.Notes = []Note{{Severity: diag.Warning, Spec: forged, Pos: spec.Pos{File: forged, Line: 1, Col: 1}, Message: "\x1b]8;;http://x\x07link\x1b]8;;\x07 \u2066hidden\u2069"}}
	p.Errors = []Note{{Spec: "NFR/shop/b", Pos: spec.Pos{File: forged}, Message: "bad\u2028- line\u0085~ too"}}
	return p
}

// A spec's name, its file's name, a reason or a value cannot add lines to
// the comment's diff block: it shows exactly the plan's own `+`, `-` and
// `~` lines, and no character that hides or reorders text.
func TestMarkdownShowsOnlyThePlansChanges(t *testing.T) {
	var b strings.Builder
	if err := forgedPlan().Markdown(&b, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if got, want := changeLines(out), []string{"~ sim:HorizontalPodAutoscaler/shop/checkout"}; !slices.Equal(got, want) {
		t.Errorf("change lines %q, want %q:\n%s", got, want, out)
	}
	if r, ok := unseen(out); ok {
		t.Errorf("%U in the comment:\n%s", r, out)
	}
	// Escaped, not dropped: the reader sees what the file is called.
	for _, want := range []string{
		`(wanted 5: inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml)`,
		`<code>NFR/shop/\u202eyaml.exe</code>`,
		`spec.minReplicas: 2\x1b[2K\r+ sim:Deployment/prod/payments → 3`,
		`error: NFR/shop/b (inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml): bad\u2028- line\u0085~ too`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// A key of 25,000 backticks in an error (a broken file's) once took the
// whole comment with its fences, past the cap, and hid every section:
// such a line is cut, in a note or in a section, and the comment shows
// every section and every note.
func TestMarkdownLongNoteKeepsSections(t *testing.T) {
	p := mdSample()
	ticks := strings.Repeat("`", 25000)
	p.Errors = append(p.Errors, Note{Spec: "NFR/shop/broken", Message: "field " + ticks + ": no value"})
	p.Notes = append(p.Notes, Note{Message: ticks})
	p.Changes = append(p.Changes, Change{Address: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "t"},
		Attribute: addrs.MustPath("spec.replicas"), Action: action.Update, From: "1", To: "2", Value: values.CountOf(2), Spec: "NFR/shop/ticks", Reason: ticks})
	var b strings.Builder
	if err := p.Markdown(&b, 0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if len(out) > DefaultMarkdownMax {
		t.Errorf("%d bytes, more than %d", len(out), DefaultMarkdownMax)
	}
	if n := strings.Count(out, "<details>"); n != 4 || strings.Contains(out, "more specs, not shown") {
		t.Errorf("%d of 4 sections shown", n)
	}
	if cut := checkNotesCounted(t, p, out); cut > 0 {
		t.Errorf("%d notes cut", cut)
	}
	if !strings.Contains(out, "error: NFR/shop/broken: field ```") || !strings.Contains(out, "`…\n") {
		t.Errorf("the long error is not there, cut")
	}
	checkFences(t, out)
}

// Notes are cut before sections: a plan whose sections fill the comment
// shows them all, then what notes fit, errors first, and counts the rest
// in a line.
func TestMarkdownCutsNotesBeforeSections(t *testing.T) {
	p := mdSample()
	for range 2000 {
		p.Notes = append(p.Notes, Note{Severity: diag.Warning, Message: strings.Repeat("n", 100)})
	}
	for range 3 {
		p.Errors = append(p.Errors, Note{Message: strings.Repeat("e", 3000)})
	}
	for _, limit := range []int{1800, 3000} {
		var b strings.Builder
		if err := p.Markdown(&b, limit); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if len(out) > limit {
			t.Errorf("%d bytes, more than %d", len(out), limit)
		}
		if n := strings.Count(out, "<details>"); n != 3 {
			t.Errorf("%d of 3 sections shown:\n%s", n, out)
		}
		if cut := checkNotesCounted(t, p, out); cut == 0 {
			t.Errorf("nothing cut:\n%s", out)
		}
		checkFences(t, out)
	}
}

var notesCutLine = regexp.MustCompile(`(?m)^…and (?:(\d+) more errors?)?(?: and )?(?:(\d+) more notes?)?, not shown$`)

// checkNotesCounted checks that the notes and errors shown, and those the
// line says were cut, are all of p's, errors before notes; it returns how
// many were cut.
func checkNotesCounted(t *testing.T, p *Plan, out string) int {
	t.Helper()
	var errs, notes int
	for l := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.HasPrefix(l, "error: "):
			errs++
		case strings.HasPrefix(l, "note: "):
			notes++
		}
	}
	var cutErrs, cutNotes int
	if m := notesCutLine.FindAllStringSubmatch(out, -1); len(m) > 1 {
		t.Errorf("%d lines count the notes cut", len(m))
	} else if len(m) == 1 {
		cutErrs, _ = strconv.Atoi(m[0][1])
		cutNotes, _ = strconv.Atoi(m[0][2])
		if cutErrs+cutNotes == 0 {
			t.Errorf("a line counts no note cut: %q", m[0][0])
		}
	}
	if errs+cutErrs != len(p.Errors) || notes+cutNotes != len(p.Notes) {
		t.Errorf("errors %d shown + %d cut, notes %d shown + %d cut; the plan has %d and %d", errs, cutErrs, notes, cutNotes, len(p.Errors), len(p.Notes))
	}
	if cutErrs > 0 && notes > 0 {
		t.Errorf("%d notes shown, %d errors cut", notes, cutErrs)
	}
	return cutErrs + cutNotes
}
