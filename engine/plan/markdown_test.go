package plan

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
