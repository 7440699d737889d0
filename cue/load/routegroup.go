package load

import (
	"fmt"
	"net/netip"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

var _ = spec.RegisterCheck(spec.Check{Kind: "RouteGroup", Path: "spec.vip", What: "no two RouteGroups on one VIP (address, port and protocol, compared parsed)", Why: spec.WhySpans, Example: "sets/routegroup-vips.yaml"})

// routeGroupVIPs refuses a RouteGroup whose VIP an earlier RouteGroup on
// the same provider has, at its VIP, naming the earlier one: a VIP has one
// slot table, and two loops writing it would each undo the other's every
// tick. VIPs are compared parsed (address, port and protocol), so
// 127.100.0.1:08080/tcp is 127.100.0.1:8080/tcp, while the same address
// and port over udp is another VIP. A VIP that does not parse is its own
// document's error.
func routeGroupVIPs(docs []spec.Document, def string) Diagnostics {
	type vip struct {
		provider, proto string
		addr            netip.AddrPort
	}
	first := map[vip]*spec.RouteGroup{}
	var out Diagnostics
	for _, d := range docs {
		r, ok := d.(*spec.RouteGroup)
		if !ok {
			continue
		}
		ap, proto, err := r.Spec.VIPAddr()
		if err != nil {
			continue
		}
		k := vip{spec.ProviderOr(r.Spec.Target.Provider, def), proto, ap}
		o, dup := first[k]
		if !dup {
			first[k] = r
			continue
		}
		what := "VIP " + r.Spec.VIP
		if same := fmt.Sprintf("%s/%s", ap, proto); r.Spec.VIP != same {
			what += " (" + same + ")"
		}
		out = append(out, Diagnostic{Pos: r.Src.PosOf("spec.vip"), Path: "spec.vip",
			Message: fmt.Sprintf("%s is also the VIP of RouteGroup %s/%s at %s: each loop would undo the other's slot table every tick",
				what, o.Metadata.Namespace, o.Metadata.Name, o.Src.PosOf("spec.vip")),
			Expected: "one RouteGroup per VIP address, port and protocol on a provider"})
	}
	return out
}
