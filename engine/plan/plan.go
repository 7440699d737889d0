// Package plan is what the engine proposes: each change with its reason in
// numbers, what is held and why, and a fingerprint of everything observed
// so a saved plan applied later can tell the world moved underneath it.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
)

// FormatVersion of saved plans.
const FormatVersion = 6

// Contributor is one spec's intent on an attribute.
type Contributor struct {
	Spec      string `json:"spec"`
	Pos       string `json:"pos"`
	Kind      string `json:"kind"`
	Value     string `json:"value"`
	Rationale string `json:"rationale"`
}

// Change is one attribute's move, applied or held.
type Change struct {
	Address   addrs.Object  `json:"address"`
	Attribute addrs.Path    `json:"attribute"`
	Action    action.Action `json:"action"`
	Dimension string        `json:"dimension"`
	From      string        `json:"from,omitempty"` // empty when the object is created
	To        string        `json:"to"`             // what is (or would be) written
	Wanted    string        `json:"wanted"`         // before cap and step
	Reason    string        `json:"reason"`
	// Bounds are how the gate moved To away from Wanted (a step, a cap)
	// and whose field it takes.
	Bounds  []Bound `json:"bounds,omitempty"`
	Held    *Hold   `json:"held,omitempty"`
	Manager string  `json:"manager,omitempty"` // the field's manager before
	// Create holds the attributes of an object to create.
	Create       map[addrs.Path]values.Value `json:"create,omitempty"`
	Spec         string                      `json:"spec"`
	SpecPos      string                      `json:"specPos"`
	Contributors []Contributor               `json:"contributors,omitempty"`
	// Value is To, typed.
	Value values.Value `json:"value"`
	// Restore marks the return of the user's value (enforcement off).
	Restore bool `json:"restore,omitempty"`
	// Release marks a field setpoint stops managing because every spec
	// that set it is gone: the value stays (To is the value setpoint last
	// applied), the provider hands the field back, and the state forgets it.
	Release bool `json:"release,omitempty"`
	// By lists the specs whose intents decided the value (recorded in the
	// state with the apply).
	By []string `json:"by,omitempty"`
	// Group names coupled attributes that are applied together.
	Group string `json:"group,omitempty"`
	// Force takes the field from another manager (the gate allowed it).
	Force bool `json:"force,omitempty"`
	// InPlace: the value also goes to running pods without a restart; it
	// names what a refused resize does ("hold" or "rollout").
	InPlace string `json:"inPlace,omitempty"`
	// Seen is the value the plan read (From, typed), when it read one:
	// the provider may test it so a change made since is not overwritten.
	Seen *values.Value `json:"seen,omitempty"`
	// Repair marks an apply of an object that its provider says was cut
	// off midway (providers.Object.Repair): nothing moves (To is the value
	// setpoint last applied); the provider finishes what was left.
	Repair bool `json:"repair,omitempty"`
}

// Note is something a spec's decision has to say without a change (a
// missing signal, a pinned dimension, a target that does not exist) or an
// error the user must fix: setpoint's one diagnostics type, with the spec
// and the position in its file.
type Note = diag.Diagnostic

// noteLine is a note as the plan prints it, on one line whatever it says
// (kind "note" or "error").
func noteLine(kind string, n Note) string {
	return diag.Escape(kind + ": " + noteHead(n) + n.Message)
}

// noteHead is "SPEC (POS): " before a note's message, each part only when
// the note has it.
func noteHead(n Note) string {
	switch pos := n.Pos.String(); {
	case n.Spec != "" && pos != "":
		return n.Spec + " (" + pos + "): "
	case n.Spec != "":
		return n.Spec + ": "
	case pos != "":
		return "(" + pos + "): "
	}
	return ""
}

// Plan is a proposal.
type Plan struct {
	FormatVersion   int               `json:"formatVersion"`
	SetpointVersion string            `json:"setpointVersion"`
	At              time.Time         `json:"at"`
	Dir             string            `json:"dir"`
	Specs           map[string]string `json:"specs"` // spec ID → digest
	// Observed is every attribute the plan read, "address attribute" →
	// value and manager; Fingerprint hashes it.
	Observed    map[string]string `json:"observed"`
	Fingerprint string            `json:"fingerprint"`
	Changes     []Change          `json:"changes"`
	Held        []Change          `json:"held"`
	Notes       []Note            `json:"notes"`
	Errors      []Note            `json:"errors"`
	// Adopted is what the plan adopted into the state (the user's values
	// it read, setpoint's own writes it recognised): applying the saved
	// plan records them where the state has none, so a plan made with
	// --read-only (which saves nothing) leaves the same state as apply.
	Adopted []Adoption `json:"adopted,omitempty"`
	// ChangesDigest hashes Changes, Held and Adopted, so an edited plan
	// file is refused.
	ChangesDigest string `json:"changesDigest"`

	// Due is, per spec, the earliest time a held change of it may pass the
	// gate (a stability window or a cooldown ends): when to look again.
	Due map[string]time.Time `json:"-"`

	// record fills Specs and Observed. They matter only for a plan that is
	// written out, so a loop that plans every tick does not pay for them.
	record func(p *Plan)
}

// Record arranges for Specs and Observed to be filled when the plan is
// written out (JSON, Save).
func (p *Plan) Record(f func(p *Plan)) { p.record = f }

// Seal fills Specs and Observed (once) and fingerprints the observations.
func (p *Plan) Seal() {
	if p.record != nil {
		p.record(p)
		p.record = nil
	}
	p.Fingerprint = Fingerprint(p.Observed)
	p.ChangesDigest = p.digestChanges()
}

// digestChanges hashes the changes and holds as JSON (struct fields in
// order, maps sorted: stable bytes).
func (p *Plan) digestChanges() string {
	b, err := json.Marshal(struct {
		C []Change   `json:"c"`
		H []Change   `json:"h"`
		A []Adoption `json:"a,omitempty"`
	}{p.Changes, p.Held, p.Adopted})
	if err != nil {
		return "unmarshalable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Fingerprint hashes observations in key order.
func Fingerprint(obs map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(obs)) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, obs[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Moved lists the observations that differ between a plan and a fresh read.
func Moved(planned, now map[string]string) []string {
	var out []string
	for k, v := range planned {
		if w, ok := now[k]; !ok {
			// Not read now: no spec reads it any more (one was deleted or
			// edited), which says nothing of whether the object exists.
			out = append(out, fmt.Sprintf("%s: was %s, not observed now (no spec reads it any more)", k, v))
		} else if w != v {
			out = append(out, fmt.Sprintf("%s: was %s, now %s", k, v, w))
		}
	}
	for k, w := range now {
		if _, ok := planned[k]; !ok {
			out = append(out, fmt.Sprintf("%s: not there when planned, now %s", k, w))
		}
	}
	sort.Strings(out)
	return out
}

// Counts are the summary line's numbers.
type Counts struct {
	Add, Change, Destroy, Release, Held int
}

// Summary counts objects to add and change and changes held.
func (p *Plan) Summary() Counts {
	var c Counts
	seen := map[addrs.Object]bool{}
	for _, ch := range p.Changes {
		if ch.Release {
			c.Release++
			continue
		}
		if seen[ch.Address] {
			continue
		}
		seen[ch.Address] = true
		switch ch.Action {
		case action.Create:
			c.Add++
		case action.Update:
			c.Change++
		case action.Delete:
			c.Destroy++
		}
	}
	c.Held = len(p.Held)
	return c
}

// Empty reports whether nothing would be applied.
func (p *Plan) Empty() bool { return len(p.Changes) == 0 }

func (c Change) reason() string {
	parts := []string{}
	switch {
	case len(c.Wanted) > maxShown && c.Reason != "":
		// A whole structured value: the line above shows it (or what
		// changed in it); the JSON plan has it whole.
		parts = append(parts, c.Reason)
	case c.Wanted != "" && (c.Wanted != c.To || c.Reason != ""):
		r := "wanted " + c.Wanted
		if c.Reason != "" {
			r += ": " + c.Reason
		}
		parts = append(parts, r)
	case c.Reason != "":
		parts = append(parts, c.Reason)
	}
	for _, b := range c.Bounds {
		parts = append(parts, b.String())
	}
	for _, k := range c.Contributors {
		parts = append(parts, fmt.Sprintf("%s %s %s from %s (%s)", k.Kind, k.Value, k.Rationale, k.Spec, k.Pos))
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

// Text writes the plan for people: Terraform-style symbols, each change
// with its numbers, a held section, notes and a summary line.
func (p *Plan) Text(w io.Writer) {
	var last addrs.Object
	for _, c := range p.Changes {
		if c.Address != last {
			line(w, "%s %s", c.Action.Symbol(), c.Address)
			last = c.Address
		}
		if c.Action == action.Delete {
			line(w, "    %s", c.reason())
			continue
		}
		if c.Action == action.Create {
			keys := slices.SortedFunc(maps.Keys(c.Create), func(a, b addrs.Path) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				line(w, "    %s: %s", k, shortValue(c.Create[k].String()))
			}
			line(w, "    %s", c.reason())
			continue
		}
		if c.Release {
			line(w, "    %s: %s (released: setpoint stops managing it; the value stays)   %s", c.Attribute, shortValue(c.To), c.reason())
			continue
		}
		if c.Repair {
			line(w, "    %s: %s (applied again, unchanged, to finish an apply that was cut off)   %s", c.Attribute, shortValue(c.To), c.reason())
			continue
		}
		if d, ok := fieldDiff(c.From, c.To); ok {
			line(w, "    %s: %s   %s", c.Attribute, d, c.reason())
			continue
		}
		line(w, "    %s: %s → %s   %s", c.Attribute, c.From, c.To, c.reason())
	}
	for _, c := range p.Held {
		line(w, "held: %s %s", c.Address, c.Attribute)
		from := c.From
		if c.Action == action.Create {
			from = "(new)"
		}
		change := shortValue(from) + " → " + shortValue(c.To)
		if c.Release {
			// A release writes no new value (From is To, setpoint's last):
			// a diff of the two would say nothing changed, not what is
			// released.
			change = "release " + shortValue(c.To) + " (setpoint would stop managing it; the value stays)"
		} else if c.Repair {
			change = "apply again, unchanged: " + shortValue(c.To)
		} else if d, ok := fieldDiff(from, c.To); ok {
			change = d
		}
		if r := c.reason(); r != "" {
			line(w, "    %s %s: %s", change, r, c.Held)
		} else {
			line(w, "    %s: %s", change, c.Held)
		}
	}
	for _, n := range p.Notes {
		fmt.Fprintln(w, noteLine("note", n))
	}
	for _, n := range p.Errors {
		fmt.Fprintln(w, noteLine("error", n))
	}
	s := p.Summary()
	if s.Add+s.Change+s.Release+s.Held == 0 && len(p.Errors) == 0 {
		fmt.Fprintln(w, "No changes. The workloads match their specs.")
		return
	}
	release := ""
	if s.Release > 0 {
		release = fmt.Sprintf(", %d to release", s.Release)
	}
	fmt.Fprintf(w, "Plan: %d to add, %d to change, %d to destroy%s; %d held.\n", s.Add, s.Change, s.Destroy, release, s.Held)
}

// line writes one line of the text plan, escaped whole rather than field
// by field: most of a line comes from specs, file names and what a
// provider read (a name, a position, a value, a reason, a hold's detail),
// and a field added later cannot bring a newline, a terminal escape or a
// bidi control in unescaped; the plan's own words have nothing to escape.
func line(w io.Writer, format string, args ...any) {
	fmt.Fprintln(w, diag.Escape(fmt.Sprintf(format, args...)))
}

// JSON writes the plan for machines.
func (p *Plan) JSON(w io.Writer) error {
	p.Seal()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(p)
}

// Save writes a plan file atomically.
func (p *Plan) Save(path string) error {
	var b bytes.Buffer
	if err := p.JSON(&b); err != nil {
		return fmt.Errorf("saving plan: %w", err)
	}
	return atomicfile.Write(path, b.Bytes(), 0o644)
}

// MaxPlanFile bounds a saved plan read back.
const MaxPlanFile = 256 << 20

// Load reads a saved plan.
func Load(path string) (*Plan, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	if fi.Size() > MaxPlanFile {
		return nil, fmt.Errorf("%s: %d bytes is larger than a saved plan can be (%d)", path, fi.Size(), MaxPlanFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	defer f.Close()
	// The file may have grown since the Stat.
	b, err := io.ReadAll(io.LimitReader(f, MaxPlanFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	if len(b) > MaxPlanFile {
		return nil, fmt.Errorf("%s: larger than a saved plan can be (%d bytes)", path, MaxPlanFile)
	}
	return parse(path, b)
}

// parse reads a saved plan's bytes; path names it in errors.
func parse(path string, b []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s is not a saved plan: %w", path, err)
	}
	if p.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%s: plan format %d, this release reads %d", path, p.FormatVersion, FormatVersion)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("%s is not a saved plan: %w", path, err)
	}
	if Fingerprint(p.Observed) != p.Fingerprint {
		return nil, fmt.Errorf("%s: the plan's observations do not match its fingerprint: it was edited", path)
	}
	if got := p.digestChanges(); got != p.ChangesDigest {
		return nil, fmt.Errorf("%s: the plan's changes do not match their digest (%s, computed %s): it was edited", path, short(p.ChangesDigest), short(got))
	}
	return &p, nil
}

// observedManager separates a value from its field's manager in Observed.
const observedManager = " (manager "

// ObservedValue is an attribute as a plan's Observed records it: its value
// and its field's manager (last: a string value may hold the separator).
func ObservedValue(v values.Value, manager string) string {
	return v.String() + observedManager + manager + ")"
}

// check refuses a change a saved plan could not have held: one without an
// address, or (but for a delete) an attribute or a value (JSON leaves a
// missing field zero).
func (p *Plan) check() error {
	// What the plan adopted is what it observed: a user value in it that
	// the plan did not read would be recorded as the user's.
	for i, a := range p.Adopted {
		v := a.User
		if v == nil {
			v = a.Own
		}
		key := a.Address.String() + " " + a.Attribute.String()
		seen, ok := p.Observed[key]
		// The manager comes last (a value may hold the separator).
		if at := strings.LastIndex(seen, observedManager); v == nil || !ok || at < 0 || seen[:at] != v.String() {
			return fmt.Errorf("adoption %d (%s) is not a value the plan observed", i, key)
		}
	}
	for _, list := range [][]Change{p.Changes, p.Held} {
		for i, c := range list {
			switch {
			case c.Address.IsZero():
				return fmt.Errorf("change %d has no address", i)
			case c.Action == action.Delete:
				// A whole object: no attribute, no value.
			case c.Attribute.IsZero():
				return fmt.Errorf("change %d (%s) has no attribute", i, c.Address)
			case !c.Value.IsValid():
				return fmt.Errorf("change %d (%s %s) has no value", i, c.Address, c.Attribute)
			}
		}
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// DeletesGone lists the deletes of a saved plan that a fresh plan no longer
// makes (not at all, or held): what decided them (an empty cluster's
// instance count, from a signal) may have moved without any observed
// attribute moving, and a delete cannot be undone, so such a saved plan is
// stale.
func DeletesGone(saved, fresh *Plan) []string {
	now := map[string]bool{}
	for _, c := range fresh.Changes {
		if c.Action == action.Delete {
			now[c.Address.String()] = true
		}
	}
	var out []string
	for _, c := range saved.Changes {
		if c.Action == action.Delete && !now[c.Address.String()] {
			why := "a plan now does not delete it"
			for _, h := range fresh.Held {
				if h.Action == action.Delete && h.Address == c.Address && h.Held != nil {
					why = "a plan now holds its delete: " + h.Held.String()
				}
			}
			out = append(out, c.Address.String()+": "+why)
		}
	}
	return out
}
