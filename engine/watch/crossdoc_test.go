package watch

import (
	"strings"
	"testing"
)

// An edit that would give two NodePolicies one node, or two RouteGroups
// one VIP, is refused like any rule across files: the last good set keeps
// running, and the edit goes in once the conflict is gone.
func TestWatchRefusesNodeAndVIPConflicts(t *testing.T) {
	pol := func(name, selector string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: NodePolicy\nmetadata: {name: " + name + "}\nspec:\n" + selector +
			"  pools: [{name: web, namespaces: [shop], maxCPUs: 4}]\n"
	}
	rg := func(name, vip string) string {
		return "apiVersion: setpoint.dev/v1alpha1\nkind: RouteGroup\nmetadata: {name: " + name + "}\nspec:\n  vip: " + vip +
			"\n  backends: {endpoints: [127.0.0.1:9001]}\n"
	}
	h := newHarness(t, nil)
	write(t, h.dir, "a.yaml", pol("a", "  nodeSelector: {pool: compute}\n"), rg("va", "127.100.0.1:8080/tcp"))
	h.run(t)
	h.expect(t, "start", "NodePolicy/default/a", "RouteGroup/default/va")

	for _, c := range []struct{ docs, why string }{
		{pol("b", ""), "can take the same nodes as NodePolicy default/a"},
		{rg("vb", "127.100.0.1:08080/tcp"), "is also the VIP of RouteGroup default/va"},
	} {
		write(t, h.dir, "b.yaml", c.docs)
		r := h.waitLog(t, "edit rejected; the last good version keeps running", "b.yaml")
		if !strings.Contains(r.attrs["error"], c.why) {
			t.Fatalf("rejected for %s, want %q", r.attrs["error"], c.why)
		}
		if n := len(h.w.Set().Specs); n != 2 {
			t.Fatalf("%d specs after a rejected edit, want the 2 of a.yaml", n)
		}
	}
	write(t, h.dir, "b.yaml", pol("b", "  nodeSelector: {pool: batch}\n"), rg("vb", "127.100.0.1:8080/udp"))
	h.expect(t, "edit of b.yaml", "NodePolicy/default/b", "RouteGroup/default/vb")
}
