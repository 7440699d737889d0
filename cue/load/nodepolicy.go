package load

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

var _ = spec.RegisterCheck(spec.Check{Kind: "NodePolicy", Path: "spec.nodeSelector", What: "no two NodePolicies whose selectors can take the same node (one without a selector takes every node)", Why: spec.WhySpans, Example: "sets/nodepolicy-overlap.yaml"})

// nodePolicyOverlaps refuses a NodePolicy whose nodeSelector can take a
// node an earlier NodePolicy's can (on the same provider), at its
// nodeSelector, naming the earlier one: a node runs one policy, so the two
// would fight over its CPUs, and which one a node ran would depend on the
// order they were applied in. A selector is only matchLabels, so two
// overlap unless they require different values for one label (see
// spec.SelectorsOverlap); a policy without one takes every node.
//
// Comparing every pair would be quadratic in the policies; instead they
// are grouped by the set of label keys their selectors use. Against a
// group, a selector overlaps a member exactly when both have the same
// values on the keys they share, a map lookup; so the work grows with the
// policies times the distinct key sets, which are few.
func nodePolicyOverlaps(docs []spec.Document, def string) Diagnostics {
	type group struct {
		keys    []string
		members []int // indexes into pols, in document order
		// first is, per set of shared keys (joined), the first member with
		// each projection of its selector onto them.
		first map[string]map[string]int
	}
	var pols []*spec.NodePolicy
	byKeys := map[string]*group{}   // provider and key set
	byProv := map[string][]*group{} // in the order first seen, so the walk is deterministic
	for _, d := range docs {
		n, ok := d.(*spec.NodePolicy)
		if !ok {
			continue
		}
		prov := spec.ProviderOr(n.Spec.Target.Provider, def)
		keys := slices.Sorted(maps.Keys(n.Spec.NodeSelector))
		gk := fmt.Sprintf("%q %q", prov, keys)
		g := byKeys[gk]
		if g == nil {
			g = &group{keys: keys, first: map[string]map[string]int{}}
			byKeys[gk] = g
			byProv[prov] = append(byProv[prov], g)
		}
		g.members = append(g.members, len(pols))
		pols = append(pols, n)
	}
	// Quoted, so no label key or value, whatever it holds, makes two
	// different lists read the same.
	project := func(sel map[string]string, keys []string) string {
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(strconv.Quote(sel[k]))
		}
		return b.String()
	}
	var out Diagnostics
	for i, n := range pols {
		earliest := -1
		for _, g := range byProv[spec.ProviderOr(n.Spec.Target.Provider, def)] {
			if g.members[0] >= i {
				continue // nothing before this one
			}
			var shared []string
			for _, k := range g.keys {
				if _, ok := n.Spec.NodeSelector[k]; ok {
					shared = append(shared, k)
				}
			}
			sk := fmt.Sprintf("%q", shared)
			idx := g.first[sk]
			if idx == nil {
				idx = map[string]int{}
				for _, m := range g.members {
					p := project(pols[m].Spec.NodeSelector, shared)
					if _, seen := idx[p]; !seen {
						idx[p] = m
					}
				}
				g.first[sk] = idx
			}
			if j, ok := idx[project(n.Spec.NodeSelector, shared)]; ok && j < i && (earliest < 0 || j < earliest) {
				earliest = j
			}
		}
		if earliest < 0 {
			continue
		}
		o := pols[earliest]
		node, _ := spec.SelectorsOverlap(n.Spec.NodeSelector, o.Spec.NodeSelector)
		both := "every node would run both"
		if len(node) > 0 {
			both = "a node labelled " + spec.SelectorString(node) + " would run both"
		}
		subject := "nodeSelector " + spec.SelectorString(n.Spec.NodeSelector)
		if len(n.Spec.NodeSelector) == 0 {
			subject = "without a nodeSelector, it"
		}
		expected := "a nodeSelector that requires a value other than " + o.Metadata.Name + "'s for one of its labels (a node runs one NodePolicy)"
		if len(o.Spec.NodeSelector) == 0 {
			expected = "nodeSelectors on both that require different values for one label (" + o.Metadata.Name + " has none, so it takes every node; a node runs one NodePolicy)"
		}
		out = append(out, Diagnostic{Pos: n.Src.PosOf("spec.nodeSelector"), Path: "spec.nodeSelector",
			Message: fmt.Sprintf("%s can take the same nodes as NodePolicy %s/%s (%s) at %s: %s",
				subject, o.Metadata.Namespace, o.Metadata.Name, describeSelector(o.Spec.NodeSelector),
				o.Src.PosOf("spec.nodeSelector"), both),
			Expected: expected})
	}
	return out
}

func describeSelector(sel map[string]string) string {
	if len(sel) == 0 {
		return "no nodeSelector: every node"
	}
	return "nodeSelector " + spec.SelectorString(sel)
}
