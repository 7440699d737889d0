package sim

import (
	"fmt"
	"maps"

	vocab "github.com/setpoint-dev/setpoint/providers/workload"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// Kinds the sim world serves.
const (
	KindDeployment = vocab.Deployment
	KindHPA        = vocab.HPA
	KindKnative    = vocab.Knative
)

// Attribute paths the sim world serves: package workload's (imported as vocab), as the
// kubernetes provider's are.
var (
	AttrReplicas        = vocab.Replicas
	AttrReadyReplicas   = vocab.ReadyReplicas
	AttrMinReplicas     = vocab.MinReplicas
	AttrMaxReplicas     = vocab.MaxReplicas
	AttrCurrentReplicas = vocab.CurrentReplicas
	AttrDesiredReplicas = vocab.DesiredReplicas
	// What an HPA scales; a Deployment's ReplicaFailure condition (never
	// True here: the sim world has no quota).
	AttrScaleTargetKind       = vocab.ScaleTargetKind
	AttrScaleTargetName       = vocab.ScaleTargetName
	AttrReplicaFailure        = vocab.ReplicaFailure
	AttrReplicaFailureMessage = vocab.ReplicaFailureMessage
	AttrTargetCPU             = vocab.TargetCPU
	AttrScaleDownWindow       = vocab.ScaleDownWindow
	AttrMinScale              = vocab.MinScale
	AttrMaxScale              = vocab.MaxScale

	pathStatus       = vocab.Status
	pathTemplateSpec = addrs.MustPath("spec.template.spec")
	pathContainers   = vocab.Containers
)

// DefaultManager owns fields no configured manager claims: what kubectl
// apply records.
const DefaultManager = "kubectl-client-side-apply"

// HPAManager is the field manager of what an HPA writes (a Deployment's
// replicas).
const HPAManager = "horizontal-pod-autoscaler"

// ContainerAttr is the path of a container's memory request or limit
// (which: "requests" or "limits").
func ContainerAttr(container, which string) addrs.Path {
	return vocab.ContainerAttr(container, which)
}

// object is one API object of the world, with what the gate needs: the
// manager of each field, labels, annotations and a generation. Attributes
// are typed inside the world too, so nothing on a hot path parses.
type object struct {
	wl                    *workload // the workload it belongs to
	kind, namespace, name string
	attrs                 map[addrs.Path]values.Value
	managers              map[addrs.Path]string
	managerOf             func(addrs.Path) string
	labels                map[string]string
	annotations           map[string]string
	generation            int64  // bumped by every spec change
	templateGen           int64  // bumped by pod-template changes: a rollout
	createdBy             string // the manager that created it through Apply ("" for configured objects)
}

func (o *object) key() string { return o.kind + "/" + o.namespace + "/" + o.name }

// manager returns who owns attr.
func (o *object) manager(attr addrs.Path) string {
	if m, ok := o.managers[attr]; ok {
		return m
	}
	return o.managerOf(attr)
}

// toObject is the object as a provider reports it at second sec.
func (o *object) toObject(addr providers.Address, sec int) providers.Object {
	obj := providers.Object{
		Address:     addr,
		Exists:      true,
		Generation:  o.generation,
		Attributes:  make(map[addrs.Path]values.Value, len(o.attrs)+1),
		Managers:    make(map[addrs.Path]string, len(o.attrs)),
		Labels:      maps.Clone(o.labels),
		Annotations: maps.Clone(o.annotations),
	}
	for k, v := range o.attrs {
		obj.Attributes[k] = v
		if m := o.manager(k); m != "" {
			obj.Managers[k] = m
		}
	}
	if o.kind == KindDeployment || o.kind == KindKnative {
		obj.Attributes[AttrReadyReplicas] = values.CountOf(int64(o.wl.ready(sec)))
	}
	if o.kind == KindHPA {
		// Every HPA of the sim world scales its workload's Deployment,
		// and says so as a cluster's does: setpoint finds an HPA by what
		// it scales, not by its name.
		for p, v := range map[addrs.Path]string{AttrScaleTargetKind: KindDeployment, AttrScaleTargetName: o.wl.cfg.Name} {
			obj.Attributes[p] = values.StringOf(v)
			if m := o.manager(p); m != "" {
				obj.Managers[p] = m
			}
		}
	}
	return obj
}

// attrType is the type of a writable attribute of a kind of object of
// the workload; an error says why the path cannot be applied, as an API
// server would refuse it.
func (wl *workload) attrType(kind string, p addrs.Path) (values.Type, error) {
	if p.HasPrefix(pathStatus) {
		return values.Invalid, fmt.Errorf("%s: status is written by controllers, not applied", p)
	}
	switch p {
	case AttrReplicas:
		if kind == KindDeployment {
			return values.Count, nil
		}
	case AttrMinReplicas, AttrMaxReplicas, AttrTargetCPU, AttrScaleDownWindow:
		if kind == KindHPA {
			return values.Count, nil
		}
	case AttrMinScale, AttrMaxScale:
		if kind == KindKnative {
			return values.Count, nil
		}
		return values.Invalid, fmt.Errorf("%s: only a KnativeService has it", p)
	default:
		if kind != KindHPA && p.HasPrefix(pathContainers) {
			if _, ok := wl.containerOf[p]; ok {
				return values.Bytes, nil
			}
			if name, ok := p.Selected("name"); ok && !wl.hasContainer(name) {
				return values.Invalid, fmt.Errorf("%s: no such container %q", p, name)
			}
		}
	}
	return values.Invalid, fmt.Errorf("%s: %s has no such attribute", p, kind)
}

// checkValue refuses what an API server would: a value of the wrong type,
// a negative one, an HPA's minReplicas below 1.
func (wl *workload) checkValue(kind string, p addrs.Path, v values.Value) error {
	t, err := wl.attrType(kind, p)
	if err != nil {
		return err
	}
	switch {
	case !v.IsValid():
		return fmt.Errorf("%s: no value", p)
	case v.Type() != t:
		return fmt.Errorf("%s: want a %s, got the %s %s", p, t, v.Type(), v)
	case v.Int() < 0:
		return fmt.Errorf("%s: %s is negative", p, v)
	case p == AttrMinReplicas && v.Int() < 1:
		return fmt.Errorf("%s: must be at least 1, got %s", p, v)
	case (p == AttrReplicas || p == AttrMinReplicas || p == AttrMinScale) && v.Int() > MaxPodsPerWorkload:
		// The ceilings (maxReplicas, max-scale) may be higher: the
		// autoscalers stop at the bound whatever they say.
		return fmt.Errorf("%s: %s: the sim world runs at most %d pods per workload", p, v, MaxPodsPerWorkload)
	}
	return nil
}

func (wl *workload) hasContainer(name string) bool {
	for _, ct := range wl.cfg.Containers {
		if ct.Name == name {
			return true
		}
	}
	return false
}
