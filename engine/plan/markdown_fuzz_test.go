package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// fuzzAddrs are the objects of FuzzMarkdown's plans, each with how its
// heading line must show it: names from a spec may carry anything.
var fuzzAddrs = [...]struct {
	a     addrs.Object
	shown string
}{
	{addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}, "sim:Deployment/shop/a"},
	{addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "b\n+ sim:Deployment/prod/payments"}, `sim:Deployment/shop/b\n+ sim:Deployment/prod/payments`},
	{addrs.Object{Provider: "sim", Kind: "Cluster", Name: "c\u202e\u2066x"}, `sim:Cluster/c\u202e\u2066x`},
	{addrs.Object{Provider: "sim\x1b[32m", Kind: "Deployment", Namespace: "µ∕ns", Name: "d\r~ e"}, `sim\x1b[32m:Deployment/µ∕ns/d\r~ e`},
}

// fuzzPlan is a plan of eight changes, applied or held, over fuzzAddrs
// (shape picks each one's object, action, spec and whether it is held),
// with the free text given wherever a spec, a file or a provider puts
// text: specs, positions, paths, reasons, values, bounds, holds, notes.
func fuzzPlan(specA, specB, pos, text, value string, shape uint64, addr func(i int) addrs.Object) *Plan {
	p := &Plan{}
	for i := range 8 {
		bits := shape >> (6 * i)
		c := Change{
			Address:   addr(int(bits & 3)),
			Attribute: addrs.FromSteps(addrs.F("spec"), addrs.Sel("name", text), addrs.F(value)),
			Action:    action.Update,
			From:      value, To: text, Wanted: value, Reason: text,
			Spec: specA, SpecPos: pos,
			Value:        values.StringOf(text),
			Bounds:       []Bound{{Kind: BoundCap, Cap: values.StringOf(value), Field: text}, {Kind: BoundTakeover, Manager: value}},
			Contributors: []Contributor{{Spec: specB, Pos: pos, Kind: "exact", Value: value, Rationale: text}},
		}
		if bits&16 != 0 {
			c.Spec = specB
		}
		switch bits >> 2 & 3 {
		case 1:
			c.Action = action.Create
			c.Create = map[addrs.Path]values.Value{addrs.FromSteps(addrs.F(text)): values.StringOf(value), addrs.MustPath("spec.x"): values.StringOf(text)}
		case 2:
			c.Action, c.Attribute = action.Delete, addrs.Path{}
		case 3:
			c.Release = true
		}
		if bits&32 != 0 {
			c.Held = &Hold{Kind: HoldPaused, Detail: text}
			p.Held = append(p.Held, c)
		} else {
			p.Changes = append(p.Changes, c)
		}
	}
	p.Notes = []Note{{Severity: diag.Warning, Spec: specA, Pos: spec.Pos{File: pos, Line: 1, Col: 1}, Message: text}}
	p.Errors = []Note{{Spec: specB, Pos: spec.Pos{File: pos}, Message: value}}
	return p
}

// FuzzMarkdown: whatever text specs, files and providers bring, the
// comment's lines that a diff block colours as changes (`+`, `-`, `~`)
// are exactly those of the plan's changes, and no line of it carries a
// control, bidi or other invisible character. The lines expected come
// from the same plan with every piece of text a plain placeholder (the
// specs' equalities kept, so sections group as they do) and each object's
// heading as fuzzAddrs says it.
func FuzzMarkdown(f *testing.F) {
	all := uint64(0)
	for i := range 8 {
		all |= uint64(i%4|(i%3)<<2|(i%2)<<4|(i/5)<<5) << (6 * i)
	}
	f.Add(forged, "NFR/shop/b", forged, forged, "3", all)
	f.Add("NFR/shop/a", "NFR/shop/a", "dir/\u202egnp.yaml", "\u202e003 → 3\u202c", "\u2066x\u2069\u200e\u200f\u202a\u202b\u202d", all^0xFFFF)
	f.Add("\x1b[31mNFR/shop/a", "", "f.yaml\x1b[2K\r", "\x1b]8;;http://x\x07y\x1b]8;;\x07\x9b2J\x7f", "\x00\x85\u2028- z", uint64(0x0123456789ABCDEF))
	f.Add("", "(no spec)", "", "```\n~~~\n+ a", "\xff\xfe", uint64(0xFFFFFFFFFFFF))
	f.Fuzz(func(t *testing.T, specA, specB, pos, text, value string, shape uint64) {
		p := fuzzPlan(specA, specB, pos, text, value, shape, func(i int) addrs.Object { return fuzzAddrs[i].a })
		placeholder := func(s string) string {
			switch s {
			case "", "(no spec)":
				return s
			case specA:
				return "A"
			}
			return "B"
		}
		plain := fuzzPlan(placeholder(specA), placeholder(specB), "p", "t", "v", shape, func(i int) addrs.Object {
			return addrs.Object{Provider: "sim", Kind: "Placeholder", Name: fmt.Sprint(i)}
		})
		var want []string
		for _, l := range changeLines(markdown(t, plain, 1<<30)) {
			var i int
			if _, err := fmt.Sscanf(l[1:], " sim:Placeholder/%d", &i); err != nil {
				t.Fatalf("placeholder plan: %q: %v", l, err)
			}
			want = append(want, l[:1]+" "+fuzzAddrs[i].shown)
		}
		slices.Sort(want)

		// Room for the whole plan: no section is left out.
		out := markdown(t, p, 1<<30)
		got := changeLines(out)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("change lines\n%q\nwant\n%q\nin:\n%s", got, want, out)
		}
		if r, ok := unseen(out); ok {
			t.Fatalf("%U in:\n%s", r, out)
		}
		checkFences(t, out)

		// A comment's room: some sections may be left out, none added.
		out = markdown(t, p, 0)
		for _, l := range changeLines(out) {
			i, found := slices.BinarySearch(want, l)
			if !found {
				t.Fatalf("change line %q is not the plan's, in:\n%s", l, out)
			}
			want = slices.Delete(want, i, i+1)
		}
		if r, ok := unseen(out); ok {
			t.Fatalf("%U in:\n%s", r, out)
		}
		checkFences(t, out)
	})
}

func markdown(t *testing.T, p *Plan, limit int) string {
	t.Helper()
	var b strings.Builder
	if err := p.Markdown(&b, limit); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// checkFences checks out's Markdown blocks as CommonMark reads them: each
// code fence opened is closed, by a fence of its own length, and the
// collapsible sections open and close outside code, one at a time.
func checkFences(t *testing.T, out string) {
	t.Helper()
	open, details := "", 0
	for n, l := range strings.Split(out, "\n") {
		// A fence may be indented up to three spaces; a closing one may
		// end in spaces and must be at least as long as the opening one.
		body := strings.TrimLeft(l, " ")
		if len(l)-len(body) > 3 {
			continue
		}
		ticks := len(body) - len(strings.TrimLeft(body, "`"))
		if open != "" {
			if ticks >= len(open) && strings.TrimRight(body[ticks:], " \t") == "" {
				if l != open {
					t.Errorf("line %d: %q closes the block of %d backticks", n+1, l, len(open))
				}
				open = ""
			}
			continue
		}
		switch {
		case ticks >= 3:
			if strings.Contains(body[ticks:], "`") {
				t.Errorf("line %d: a fence with a backtick after it: %q", n+1, diag.Cut(l, 80))
			}
			open = body[:ticks]
		case strings.HasPrefix(l, "<details>"):
			if details++; details > 1 {
				t.Errorf("line %d: a section opened inside another", n+1)
			}
		case strings.HasPrefix(l, "</details>"):
			if details--; details < 0 {
				t.Errorf("line %d: a section closed that was not open", n+1)
			}
		}
	}
	if open != "" {
		t.Errorf("a block of %d backticks is not closed", len(open))
	}
	if details != 0 {
		t.Errorf("%d sections not closed", details)
	}
}

// FuzzMarkdownBounded: any plan, however many specs, notes and errors and
// however long their text and runs of backticks, makes a comment of at
// most its limit in bytes (60,000 by default), its code blocks and
// sections closed, its notes and errors each shown or counted; and notes
// never take a section's room: it shows at least the sections the same
// plan without notes shows in a little less room (the line counting notes
// cut and the summary's count of errors).
func FuzzMarkdownBounded(f *testing.F) {
	for i, text := range []string{"plain", "```", strings.Repeat("`", 300), forged, "\u202e\x1b[0m", "é€𝄞", ""} {
		f.Add(uint64(i), text)
	}
	f.Fuzz(func(t *testing.T, seed uint64, text string) {
		text = diag.Cut(text, 1000)
		r := rand.New(rand.NewPCG(seed, seed>>32^0x5e7))
		p, limit := randomPlan(r, text)
		out := markdown(t, p, limit)
		room := limit
		switch {
		case limit <= 0:
			room = DefaultMarkdownMax
		case limit < minMarkdownMax:
			room = minMarkdownMax
		}
		if len(out) > room || len(out) > DefaultMarkdownMax && limit <= 0 {
			t.Fatalf("limit %d: %d bytes", limit, len(out))
		}
		checkFences(t, out)
		checkNotesCounted(t, p, out)
		if !strings.HasPrefix(out, "#### setpoint plan\n\n") {
			t.Fatalf("no summary:\n%s", diag.Cut(out, 2000))
		}
		if room < minMarkdownMax+200 {
			return
		}
		bare := *p
		bare.Notes, bare.Errors = nil, nil
		if with, without := strings.Count(out, "<details>"), strings.Count(markdown(t, &bare, room-200), "<details>"); with < without {
			t.Fatalf("notes took sections' room: %d shown, %d without notes", with, without)
		}
	})
}

// randomPlan is a plan of up to 400 specs of a few changes each, up to
// 1,500 notes and 40 errors, their text mostly short but at times long,
// a run of backticks, or text (repeated), and a limit for it.
func randomPlan(r *rand.Rand, text string) (*Plan, int) {
	piece := func() string {
		switch n := r.IntN(40); {
		case n == 0:
			return strings.Repeat("`", r.IntN(30000))
		case n == 1:
			return strings.Repeat("x", r.IntN(70000))
		case n == 2:
			return strings.Repeat(text, r.IntN(40))
		case n < 8:
			return text
		case n < 12:
			return strings.Repeat("`", r.IntN(8)) + text + strings.Repeat("`", r.IntN(8))
		}
		return fmt.Sprintf("reason %d", r.IntN(1000))
	}
	p := &Plan{}
	specs := r.IntN(400)
	for s := range specs {
		id := fmt.Sprintf("NFR/shop/s%d", s)
		if r.IntN(20) == 0 {
			id += piece()
		}
		for c := range 1 + r.IntN(4) {
			ch := Change{Address: addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: fmt.Sprintf("w%d", s)},
				Attribute: addrs.FromSteps(addrs.F("spec"), addrs.F(fmt.Sprintf("f%d", c))), Action: action.Update,
				From: "1", To: "2", Reason: piece(), Spec: id, Value: values.CountOf(2)}
			if r.IntN(5) == 0 {
				ch.Held = &Hold{Kind: HoldPaused, Detail: piece()}
				p.Held = append(p.Held, ch)
				continue
			}
			p.Changes = append(p.Changes, ch)
		}
	}
	for range r.IntN(1500) {
		p.Notes = append(p.Notes, Note{Severity: diag.Warning, Spec: "NFR/shop/n", Message: piece()})
	}
	for range r.IntN(40) {
		p.Errors = append(p.Errors, Note{Pos: spec.Pos{File: piece()}, Message: piece() + ": " + piece()})
	}
	switch r.IntN(4) {
	case 0:
		return p, 0
	case 1:
		return p, r.IntN(minMarkdownMax)
	}
	return p, minMarkdownMax + r.IntN(DefaultMarkdownMax-minMarkdownMax+1)
}
