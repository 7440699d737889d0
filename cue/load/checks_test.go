package load

import (
	"regexp"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// TestRegisteredChecksFire: every check registered for the reference docs
// is real. Its example, through the loader as `setpoint validate` runs it,
// has an error at the check's path (or below it), in a document of its
// kind, that the schema alone does not make. A check without an example is one of the file system's or YAML
// syntax's, which tests of their own exercise.
func TestRegisteredChecksFire(t *testing.T) {
	checks := spec.Checks()
	if len(checks) < 40 {
		t.Fatalf("only %d checks registered", len(checks))
	}
	index := regexp.MustCompile(`\.[0-9]+(\.|$)`)
	l := newLoader(t)
	schemaOnly := newLoader(t)
	schemaOnly.SchemaOnly = true
	for _, c := range checks {
		if c.What == "" || c.Why == "" {
			t.Errorf("%+v: a check says what it wants and why CUE does not check it", c)
		}
		if c.Example == "" {
			if c.Why != spec.WhyFiles && c.Why != spec.WhySyntax {
				t.Errorf("%s %s: no example", c.Kind, c.Path)
			}
			continue
		}
		r := l.Load("../../testdata/" + c.Example)
		// An error the schema alone makes is not the check's; the
		// checks across documents and of the YAML syntax run in both.
		bySchema := map[string]bool{}
		for _, d := range schemaOnly.Load("../../testdata/" + c.Example).Diags {
			bySchema[d.Error()] = true
		}
		found := false
		for _, d := range r.Diags {
			if bySchema[d.Error()] && c.Why != spec.WhySpans && c.Why != spec.WhySyntax {
				continue
			}
			// spec.pools.3.name is spec.pools.*.name, as the check writes it.
			p := d.Path
			for index.MatchString(p) {
				p = index.ReplaceAllString(p, ".*$1")
			}
			kindOK := c.Kind == "" || d.Spec == "" || strings.HasPrefix(d.Spec, c.Kind+"/")
			if kindOK && (c.Path == "" || p == c.Path || strings.HasPrefix(p, c.Path+".")) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s %s (%s): no error at that path in testdata/%s:\n%v", c.Kind, c.Path, c.What, c.Example, r.Diags)
		}
	}
}
