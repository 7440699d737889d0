package plan

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strings"
)

// DefaultMarkdownMax is the longest Markdown plan by default: under the
// 65,536 characters a GitHub comment takes, with room for the job's own
// words around it.
const DefaultMarkdownMax = 60000

// Markdown writes the plan for a pull request's comment: a summary line,
// then each spec's part in a collapsible section (its changes and holds in
// the text form, as a diff block so `+` and `-` lines are coloured), then
// notes and errors. It writes at most max bytes (0: DefaultMarkdownMax):
// the specs that do not fit are counted in a notice at the end. What the
// cluster or a provider said goes inside code blocks whose fences are
// longer than any run of backticks in it, so no text of it is read as
// Markdown or HTML.
func (p *Plan) Markdown(w io.Writer, max int) error {
	if max <= 0 {
		max = DefaultMarkdownMax
	}
	var head bytes.Buffer
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

	var notes []string
	for _, n := range p.Errors {
		notes = append(notes, fmt.Sprintf("error: %s%s", noteHead(n), n.Message))
	}
	for _, n := range p.Notes {
		notes = append(notes, fmt.Sprintf("note: %s%s", noteHead(n), n.Message))
	}
	var sections [][]byte
	for _, id := range p.specIDs() {
		sections = append(sections, p.section(id))
	}
	const notice = "\n_…and %d more specs, not shown: the plan is longer than a comment takes. The job's log has it whole (`setpoint plan`)._\n"
	room := max - head.Len() - len(notice) - 20
	// Notes may be many (a missing signal per spec): they get at most half
	// of what is left, whole lines, errors first.
	var tail bytes.Buffer
	if len(notes) > 0 {
		budget, kept := room/2-40, 0
		for _, n := range notes {
			if budget -= len(n) + 1; budget < 0 {
				break
			}
			kept++
		}
		text := strings.Join(notes[:kept], "\n") + "\n"
		if kept < len(notes) {
			text += fmt.Sprintf("…and %d more notes, not shown\n", len(notes)-kept)
		}
		tail.WriteString("\n")
		fenced(&tail, "", text)
	}
	room -= tail.Len()
	var body bytes.Buffer
	shown := 0
	for _, sec := range sections {
		if body.Len()+len(sec) > room {
			break
		}
		body.Write(sec)
		shown++
	}
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	if _, err := w.Write(body.Bytes()); err != nil {
		return err
	}
	if shown < len(sections) {
		if _, err := fmt.Fprintf(w, notice, len(sections)-shown); err != nil {
			return err
		}
	}
	_, err := w.Write(tail.Bytes())
	return err
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
// and holds as the text plan says them.
func (p *Plan) section(id string) []byte {
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
	var b bytes.Buffer
	fmt.Fprintf(&b, "\n<details><summary><code>%s</code>: %s</summary>\n\n", html.EscapeString(id), strings.Join(counts, ", "))
	fenced(&b, "diff", strings.Join(lines, "\n")+"\n")
	b.WriteString("</details>\n")
	return b.Bytes()
}

// fenced writes text in a fenced code block of the language, its fence
// longer than any run of backticks in the text.
func fenced(b *bytes.Buffer, lang, text string) {
	run, longest := 0, 0
	for _, r := range text {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	fmt.Fprintf(b, "%s%s\n%s%s\n", fence, lang, text, fence)
}
