package load

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// pathMatches says whether an error's path is the check's: segment by
// segment, a "*" of the check's standing for any one (spec.pools.*.name
// is spec.pools.3.name; spec.nodes.* any field of spec.nodes).
func pathMatches(check, path string) bool {
	c, p := strings.Split(check, "."), strings.Split(path, ".")
	if len(c) != len(p) {
		return false
	}
	for i := range c {
		if c[i] != "*" && c[i] != p[i] {
			return false
		}
	}
	return true
}

// TestRegisteredChecksFire: every check registered for the reference docs
// is real. Its example, through the loader as `setpoint validate` runs it,
// has an error at the check's path, in a document of its
// kind, that the schema alone does not make. A check without an example is one of the file system's or YAML
// syntax's, which tests of their own exercise.
func TestRegisteredChecksFire(t *testing.T) {
	checks := spec.Checks()
	if len(checks) < 40 {
		t.Fatalf("only %d checks registered", len(checks))
	}
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
		// An error the schema alone makes is not the check's. A
		// SchemaOnly load still runs the pass over the whole directory
		// (CrossCheck) and the YAML syntax checks: what CrossCheck says
		// is Go's.
		so := schemaOnly.Load("../../testdata/" + c.Example)
		cross := map[string]bool{}
		for _, d := range CrossCheck(so.Documents, false) {
			cross[d.Error()] = true
		}
		bySchema := map[string]bool{}
		for _, d := range so.Diags {
			if !cross[d.Error()] {
				bySchema[d.Error()] = true
			}
		}
		found := false
		for _, d := range r.Diags {
			if bySchema[d.Error()] && c.Why != spec.WhySyntax {
				continue
			}
			kindOK := c.Kind == "" || d.Spec == "" || strings.HasPrefix(d.Spec, c.Kind+"/")
			if kindOK && (c.Path == "" || pathMatches(c.Path, d.Path)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s %s (%s): no error at that path in testdata/%s:\n%v", c.Kind, c.Path, c.What, c.Example, r.Diags)
		}
	}
}
