package plan

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

func sample() *Plan {
	a := addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &Plan{FormatVersion: FormatVersion, At: at, Specs: map[string]string{"NFR/shop/checkout": "d1"},
		Observed: map[string]string{a.String(): "exists=true generation=1"},
		Changes: []Change{{Address: a, Attribute: addrs.MustPath("spec.minReplicas"), Action: action.Update, From: "2", To: "3", Wanted: "5",
			Value: values.CountOf(3), By: []string{"NFR/shop/checkout"}}},
		Held: []Change{{Address: a, Attribute: addrs.MustPath("spec.maxReplicas"), Action: action.Update, From: "9", To: "8",
			Value: values.CountOf(8), Held: &Hold{Kind: HoldStability, Elapsed: 10 * time.Second, Total: 3 * time.Minute, Until: at.Add(170 * time.Second)}}},
		Notes: []Note{}, Errors: []Note{}}
}

func TestSaveLoadVerifiesTheWholePlan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	p := sample()
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	q, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if q.Changes[0].Value != values.CountOf(3) || q.Held[0].Held.String() != "stable 10 s of 180 s" || !q.Held[0].Held.Until.Equal(p.Held[0].Held.Until) {
		t.Fatalf("round trip: %+v", q)
	}
	b, _ := os.ReadFile(path)
	for _, edit := range []struct{ from, to, want string }{
		{`"to": "3"`, `"to": "30"`, "changes do not match their digest"},
		{`"value": "3"`, `"value": "30"`, "changes do not match their digest"},
		{`"elapsed": "10s"`, `"elapsed": "3m0s"`, "changes do not match their digest"},
		{`exists=true generation=1`, `exists=true generation=2`, "observations do not match"},
	} {
		if !strings.Contains(string(b), edit.from) {
			t.Fatalf("the saved plan has no %s:\n%s", edit.from, b)
		}
		os.WriteFile(path, []byte(strings.Replace(string(b), edit.from, edit.to, 1)), 0o644)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), edit.want) {
			t.Errorf("edit %s → %s: %v", edit.from, edit.to, err)
		}
	}
}

func TestTextAndSummary(t *testing.T) {
	p := sample()
	del := Change{Address: addrs.Object{Provider: "sim", Kind: "Cluster", Name: "eu-2"}, Action: action.Delete, Reason: "empty and a ready sibling shares its region"}
	p.Changes = append(p.Changes, del)
	// A delete (no attribute) saves and loads.
	path := filepath.Join(t.TempDir(), "p.json")
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	if q, err := Load(path); err != nil || q.Changes[1].Action != action.Delete || !q.Changes[1].Attribute.IsZero() {
		t.Fatalf("a plan with a delete: %v", err)
	}
	var b strings.Builder
	p.Text(&b)
	out := b.String()
	for _, want := range []string{
		"~ sim:HorizontalPodAutoscaler/shop/checkout\n    spec.minReplicas: 2 → 3   (wanted 5)",
		"- sim:Cluster/eu-2\n    (empty and a ready sibling shares its region)\n",
		"held: sim:HorizontalPodAutoscaler/shop/checkout spec.maxReplicas\n    9 → 8: stable 10 s of 180 s",
		"Plan: 0 to add, 1 to change, 1 to destroy; 1 held.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// TestBoundText: the bounds print as the design writes them.
func TestBoundText(t *testing.T) {
	for _, c := range []struct {
		b    Bound
		want string
	}{
		{Bound{Kind: BoundStep, Percent: 0.3, Of: values.CountOf(2), Up: true}, "bounded to +30% of 2, at least 1"},
		{Bound{Kind: BoundStep, Percent: 0.3, Of: values.CountOf(10)}, "bounded to -30% of 10, at least 1"},
		{Bound{Kind: BoundStep, Percent: 0.25, Of: values.BytesOf(256 << 20)}, "step bounded to 25% of 256Mi"},
		{Bound{Kind: BoundCap, Cap: values.CountOf(4), Field: "safety.maxReplicas"}, "capped at 4 by safety.maxReplicas"},
		{Bound{Kind: BoundTakeover, Manager: "kubectl-client-side-apply"}, "takes the field from kubectl-client-side-apply"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}

// The console plan escapes what specs, files and providers said: a
// forged file name adds no change line, and no terminal escape, bidi
// control or line separator reaches the terminal.
func TestTextEscapes(t *testing.T) {
	var b strings.Builder
	forgedPlan().Text(&b)
	out := b.String()
	if got, want := changeLines(out), []string{"~ sim:HorizontalPodAutoscaler/shop/checkout"}; !slices.Equal(got, want) {
		t.Errorf("change lines %q, want %q:\n%s", got, want, out)
	}
	if r, ok := unseen(out); ok {
		t.Errorf("%U in:\n%s", r, out)
	}
	for _, want := range []string{
		`    9 → 8: paused (inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml\u202e)`,
		`note: inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml (inv\n+ sim:Deployment∕prod∕payments\n+    spec.replicas: 3 → 300   (approved)\n.yaml:1:1): \x1b]8;;http://x\alink\x1b]8;;\a \u2066hidden\u2069`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// A saved plan's adoptions are values it observed: one that is not (a
// user value of 0 written into the file and the digest sealed again) is
// refused when the plan is read.
func TestAdoptionsAreWhatThePlanObserved(t *testing.T) {
	a := addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}
	path := addrs.MustPath("spec.minReplicas")
	// A string holding the separator reads back whole.
	odd := values.StringOf("x (manager y)")
	for _, c := range []struct {
		seen, user values.Value
		ok         bool
	}{{values.CountOf(2), values.CountOf(2), true}, {values.CountOf(2), values.CountOf(0), false}, {odd, odd, true}, {odd, values.StringOf("x"), false}} {
		u := c.user
		p := &Plan{FormatVersion: FormatVersion, Observed: map[string]string{a.String() + " " + path.String(): ObservedValue(c.seen, "kubectl")},
			Changes: []Change{}, Held: []Change{}, Adopted: []Adoption{{Address: a, Attribute: path, User: &u}}}
		p.Seal()
		f := filepath.Join(t.TempDir(), "plan.json")
		if err := p.Save(f); err != nil {
			t.Fatal(err)
		}
		_, err := Load(f)
		if (err == nil) != c.ok {
			t.Fatalf("adopting %s where %s was observed: %v", u, c.seen, err)
		}
	}
}
