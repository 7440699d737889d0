package addrs

import (
	"strings"
	"testing"
)

func TestParseObject(t *testing.T) {
	cases := []struct {
		in   string
		want Object
	}{
		{"sim:Deployment/shop/checkout", Object{"sim", "Deployment", "shop", "checkout"}},
		{"kubernetes:Cluster/eu-1", Object{"kubernetes", "Cluster", "", "eu-1"}},
	}
	for _, c := range cases {
		got, err := ParseObject(c.in)
		if err != nil || got != c.want || got.String() != c.in {
			t.Errorf("ParseObject(%q) = %+v, %v; prints %q", c.in, got, err, got.String())
		}
	}
	for _, bad := range []string{"", "sim", "sim:", ":Deployment/a/b", "sim:Deployment", "sim:Deployment//b", "sim:a/b/c/d", "sim:Deployment/a/"} {
		if _, err := ParseObject(bad); err == nil {
			t.Errorf("ParseObject(%q) accepted", bad)
		}
	}
	if (Object{"sim", "Cluster", "", "x"}).Key() != "Cluster/x" || (Object{"sim", "Deployment", "a", "b"}).Key() != "Deployment/a/b" {
		t.Error("Key")
	}
}

func TestParsePath(t *testing.T) {
	cases := []struct {
		in    string
		steps []Step
	}{
		{"spec.replicas", []Step{F("spec"), F("replicas")}},
		{`metadata.annotations["autoscaling.knative.dev/min-scale"]`, []Step{F("metadata"), F("annotations"), K("autoscaling.knative.dev/min-scale")}},
		{"spec.template.spec.containers[name=app].resources.requests.memory",
			[]Step{F("spec"), F("template"), F("spec"), F("containers"), Sel("name", "app"), F("resources"), F("requests"), F("memory")}},
		{"spec.ports[0].port", []Step{F("spec"), F("ports"), {Kind: Index, N: 0}, F("port")}},
		{`a["x]y.z"]`, []Step{F("a"), K("x]y.z")}},
	}
	for _, c := range cases {
		p, err := ParsePath(c.in)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", c.in, err)
			continue
		}
		if p.String() != c.in {
			t.Errorf("ParsePath(%q) prints %q", c.in, p)
		}
		got := p.Steps()
		if len(got) != len(c.steps) {
			t.Errorf("ParsePath(%q) = %+v", c.in, got)
			continue
		}
		for i := range got {
			if got[i] != c.steps[i] {
				t.Errorf("ParsePath(%q) step %d = %+v, want %+v", c.in, i, got[i], c.steps[i])
			}
		}
		if q := FromSteps(c.steps...); q != p {
			t.Errorf("FromSteps of %q = %q", c.in, q)
		}
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "a[", "a[]", "a[x]", `a["x`, `a["x"`, "a[=v]", "a]b", "a b", "a[0]b", strings.Repeat("a", MaxPathLen+1)} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
	p := MustPath("spec.template.spec.containers[name=app].resources.limits.memory")
	if c, ok := p.Selected("name"); !ok || c != "app" {
		t.Error("Selected")
	}
	if !p.HasPrefix(MustPath("spec.template.spec.containers")) || p.HasPrefix(MustPath("spec.replicas")) {
		t.Error("HasPrefix")
	}
	// Paths are comparable by value: two parses of one text are equal keys.
	m := map[Path]int{MustPath("spec.replicas"): 1}
	if m[MustPath("spec.replicas")] != 1 {
		t.Error("map key")
	}
}

func TestStepsSurviveCacheEviction(t *testing.T) {
	p := MustPath("spec.template.spec.containers[name=z].resources.requests.memory")
	stepsMu.Lock()
	clear(stepsCache)
	stepsMu.Unlock()
	if c, ok := p.Selected("name"); !ok || c != "z" {
		t.Fatalf("steps lost after eviction: %+v", p.Steps())
	}
}
