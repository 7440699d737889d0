package plan

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/engine/diag"
)

// DefaultMarkdownMax is the longest Markdown plan by default: under the
// 65,536 characters a GitHub comment takes, with room for the job's own
// words around it.
const DefaultMarkdownMax = 60000

// minMarkdownMax is the least a Markdown plan may be held to: room for
// the summary line and the lines counting what was cut.
const minMarkdownMax = 1000

// specsNotice counts the spec sections a Markdown plan leaves out.
const specsNotice = "\n_…and %d more specs, not shown: the plan is longer than a comment takes. The job's log has it whole (`setpoint plan`)._\n"

// Markdown writes the plan for a pull request's comment: a summary line,
// then each spec's part in a collapsible section (its changes and holds in
// the text form, as a diff block so `+` and `-` lines are coloured), then
// notes and errors.
//
// It writes at most limit bytes, fences and notices included (0:
// DefaultMarkdownMax; less than minMarkdownMax is taken as that). A
// reviewer reads the changes first, so when the plan is longer notes are
// left out first (errors last), then spec sections, whole, from the end;
// a line counts what each leaves out. A line longer than a tenth of limit
// is cut, so one long message cannot take the room of every section.
//
// What specs, file names and providers said is escaped (diag.Escape): a
// newline in a file name cannot add a `+` line to the diff, nor a bidi
// control show a line in another order. It goes inside code blocks whose
// fences are longer than any run of backticks in it, so no text of it is
// read as Markdown or HTML.
func (p *Plan) Markdown(w io.Writer, limit int) error {
	if limit <= 0 {
		limit = DefaultMarkdownMax
	}
	if limit < minMarkdownMax {
		limit = minMarkdownMax
	}
	lineMax := limit / 10
	head := p.markdownHead()

	var sections [][]byte
	total := 0
	for _, id := range p.specIDs() {
		sec := p.section(id, lineMax)
		sections = append(sections, sec)
		total += len(sec)
	}
	var notes []string
	for _, n := range p.Errors {
		notes = append(notes, diag.Cut(noteLine("error", n), lineMax))
	}
	for _, n := range p.Notes {
		notes = append(notes, diag.Cut(noteLine("note", n), lineMax))
	}

	room := limit - len(head)
	if len(notes) > 0 {
		// Sections come before notes, but a comment that hides its
		// errors must still say it has some: the notes' block with none
		// of them, only the line counting them, always fits.
		room -= blockSize(len(notesCut(notes, len(p.Errors), 0)), 0)
	}
	shown, notice := len(sections), ""
	if total > room {
		room -= len(fmt.Sprintf(specsNotice, len(sections))) // the notice at its longest
		shown, total = 0, 0
		for _, sec := range sections {
			if total+len(sec) > room {
				break
			}
			total += len(sec)
			shown++
		}
		notice = fmt.Sprintf(specsNotice, len(sections)-shown)
	}

	var out bytes.Buffer
	out.WriteString(head)
	for _, sec := range sections[:shown] {
		out.Write(sec)
	}
	out.WriteString(notice)
	if len(notes) > 0 {
		kept := keepNotes(notes, len(p.Errors), limit-out.Len())
		writeNotes(&out, notes, len(p.Errors), kept)
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("writing the Markdown plan: %w", err)
	}
	return nil
}

// markdownHead is the title and the summary line.
func (p *Plan) markdownHead() string {
	var head strings.Builder
	s := p.Summary()
	head.WriteString("#### setpoint plan\n\n")
	switch {
	case s.Add+s.Change+s.Release+s.Held == 0 && len(p.Errors) == 0:
		head.WriteString("**No changes.** The workloads match their specs.\n")
	default:
		release := ""
		if s.Release > 0 {
			release = fmt.Sprintf(", %d to release", s.Release)
		}
		fmt.Fprintf(&head, "**%d to add, %d to change, %d to destroy%s; %d held.**", s.Add, s.Change, s.Destroy, release, s.Held)
		switch n := len(p.Errors); {
		case n == 1:
			head.WriteString(" 1 error.")
		case n > 1:
			fmt.Fprintf(&head, " %d errors.", n)
		}
		head.WriteString("\n")
	}
	return head.String()
}

// notesCut is the line counting the notes left out of the first kept
// (errors come first in notes, errs of them), or "" when none is.
func notesCut(notes []string, errs, kept int) string {
	cutErrs := errs - min(errs, kept)
	cutNotes := len(notes) - kept - cutErrs
	var parts []string
	for _, n := range []struct {
		n    int
		what string
	}{{cutErrs, "error"}, {cutNotes, "note"}} {
		switch {
		case n.n == 1:
			parts = append(parts, "1 more "+n.what)
		case n.n > 1:
			parts = append(parts, fmt.Sprintf("%d more %ss", n.n, n.what))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "…and " + strings.Join(parts, " and ") + ", not shown\n"
}

// writeNotes writes the notes' block: the first kept notes and the line
// counting the rest, in a code block after a blank line.
func writeNotes(b *bytes.Buffer, notes []string, errs, kept int) {
	var text strings.Builder
	for _, n := range notes[:kept] {
		text.WriteString(n)
		text.WriteString("\n")
	}
	text.WriteString(notesCut(notes, errs, kept))
	b.WriteString("\n")
	fenced(b, "", text.String())
}

// blockSize is the size of writeNotes' block around text of n bytes whose
// longest run of backticks is run: a blank line and the two fences.
func blockSize(n, run int) int {
	return 1 + 2*(fenceLen(run)+1) + n
}

// keepNotes is how many of the notes, from the first, writeNotes can
// write in room bytes (0 when only the line counting them fits). It adds
// a note at a time, so a plan of many notes is not laid out many times.
func keepNotes(notes []string, errs, room int) int {
	kept, text, run := 0, 0, 0
	for k := 1; k <= len(notes); k++ {
		text += len(notes[k-1]) + 1
		run = max(run, longestRun(notes[k-1]))
		if blockSize(text, run) > room {
			break // more notes only make it longer
		}
		if blockSize(text+len(notesCut(notes, errs, k)), run) <= room {
			kept = k
		}
	}
	return kept
}

// specIDs are the specs with a change or a hold, in order.
func (p *Plan) specIDs() []string {
	seen := map[string]bool{}
	for _, c := range append(slices.Clone(p.Changes), p.Held...) {
		seen[specOf(c)] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func specOf(c Change) string {
	if c.Spec != "" {
		return c.Spec
	}
	if len(c.By) > 0 {
		return c.By[0]
	}
	return "(no spec)"
}

// section is one spec's part: a summary of its counts, then its changes
// and holds as the text plan says them, each line at most lineMax bytes.
func (p *Plan) section(id string, lineMax int) []byte {
	sub := &Plan{}
	for _, c := range p.Changes {
		if specOf(c) == id {
			sub.Changes = append(sub.Changes, c)
		}
	}
	for _, c := range p.Held {
		if specOf(c) == id {
			sub.Held = append(sub.Held, c)
		}
	}
	s := sub.Summary()
	var counts []string
	for _, n := range []struct {
		n    int
		what string
	}{{s.Add, "to add"}, {s.Change, "to change"}, {s.Destroy, "to destroy"}, {s.Release, "to release"}, {s.Held, "held"}} {
		if n.n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n.n, n.what))
		}
	}
	var text bytes.Buffer
	sub.Text(&text)
	// The last line is the sub-plan's own summary, which the section's
	// header says.
	lines := strings.Split(strings.TrimRight(text.String(), "\n"), "\n")
	if len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "Plan: ") {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = diag.Cut(l, lineMax)
	}
	var b bytes.Buffer
	// The spec's ID is cut short: it is a name, and all of it is in the
	// job's log.
	fmt.Fprintf(&b, "\n<details><summary><code>%s</code>: %s</summary>\n\n", html.EscapeString(diag.Cut(diag.Escape(id), maxSummaryID)), strings.Join(counts, ", "))
	fenced(&b, "diff", strings.Join(lines, "\n")+"\n")
	b.WriteString("</details>\n")
	return b.Bytes()
}

// maxSummaryID bounds a spec's ID in its section's summary line, before
// HTML escaping.
const maxSummaryID = 300

// fenced writes text in a fenced code block of the language, its fence
// longer than any run of backticks in the text.
func fenced(b *bytes.Buffer, lang, text string) {
	fence := strings.Repeat("`", fenceLen(longestRun(text)))
	fmt.Fprintf(b, "%s%s\n%s%s\n", fence, lang, text, fence)
}

// fenceLen is the length of a fence around text whose longest run of
// backticks is run.
func fenceLen(run int) int { return max(3, run+1) }

// longestRun is the longest run of backticks in s.
func longestRun(s string) int {
	run, longest := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}
