package workload

import (
	"slices"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers"
)

// An HPA belongs to the workload its spec.scaleTargetRef names, whatever
// its own name: providers serve the reference (read only), and deciders
// find a workload's HPAs by it among the HPAs of its namespace.
var (
	ScaleTargetKind = addrs.MustPath("spec.scaleTargetRef.kind")
	ScaleTargetName = addrs.MustPath("spec.scaleTargetRef.name")
)

// A Deployment's ReplicaFailure condition: "True" while its controller
// cannot create pods (a quota exceeded, a pod the admission refuses), the
// message saying why. Read only.
var (
	ReplicaFailure        = addrs.MustPath("status.conditions[type=ReplicaFailure].status")
	ReplicaFailureMessage = addrs.MustPath("status.conditions[type=ReplicaFailure].message")
)

// HPAList is the list query that finds the HPAs of a workload: every HPA
// of its namespace (a label selector cannot select by scaleTargetRef),
// then ScaledBy.
func HPAList(w addrs.Object) providers.ListRequest {
	return providers.ListRequest{Provider: w.Provider, Kind: HPA, Namespace: w.Namespace}
}

// ScaledBy returns the HPAs among hpas that scale w: of its provider and
// namespace, their scaleTargetRef naming its kind and name. An HPA whose
// provider does not serve the reference (a third-party provider's) is
// taken to scale the workload of its own name, as setpoint names the
// HPAs it creates.
func ScaledBy(hpas []providers.Object, w addrs.Object) []providers.Object {
	var out []providers.Object
	for _, h := range hpas {
		if t, ok := scaleTarget(h); ok && t == w {
			out = append(out, h)
		}
	}
	return out
}

// scaleTarget is the workload an HPA scales, as ScaledBy reads it.
func scaleTarget(h providers.Object) (addrs.Object, bool) {
	a := h.Address
	if !h.Exists || a.Kind != HPA {
		return addrs.Object{}, false
	}
	kind, okK := h.Attributes[ScaleTargetKind]
	name, okN := h.Attributes[ScaleTargetName]
	if !okK && !okN {
		return addrs.Object{Provider: a.Provider, Kind: Deployment, Namespace: a.Namespace, Name: a.Name}, true
	}
	return addrs.Object{Provider: a.Provider, Kind: kind.String(), Namespace: a.Namespace, Name: name.String()}, true
}

// HPAIndex is ScaledBy over one list, read once: a plan of many workloads
// in one namespace would otherwise scan its every HPA for each of them.
type HPAIndex map[addrs.Object][]providers.Object

// IndexHPAs indexes hpas by the workload each scales.
func IndexHPAs(hpas []providers.Object) HPAIndex {
	x := HPAIndex{}
	for _, h := range hpas {
		if t, ok := scaleTarget(h); ok {
			x[t] = append(x[t], h)
		}
	}
	return x
}

// ScaledBy is ScaledBy(hpas, w) of the list the index was made of.
// The slice is the index's own, clipped: an append by the caller copies.
func (x HPAIndex) ScaledBy(w addrs.Object) []providers.Object { return slices.Clip(x[w]) }

// ReplicaFailed returns why the workload's controller cannot create its
// pods, when its ReplicaFailure condition is True.
func ReplicaFailed(o providers.Object) (string, bool) {
	if o.Attributes[ReplicaFailure].String() != "True" {
		return "", false
	}
	msg := o.Attributes[ReplicaFailureMessage].String()
	if msg == "" {
		msg = "no message"
	}
	return msg, true
}
