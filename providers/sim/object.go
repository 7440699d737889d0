package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Attribute paths the sim world serves, the same as the kubernetes
// provider's.
const (
	AttrReplicas        = "spec.replicas"
	AttrReadyReplicas   = "status.readyReplicas"
	AttrMinReplicas     = "spec.minReplicas"
	AttrMaxReplicas     = "spec.maxReplicas"
	AttrCurrentReplicas = "status.currentReplicas"
	AttrDesiredReplicas = "status.desiredReplicas"
	AttrMinScale        = `spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`
	AttrMaxScale        = `spec.template.metadata.annotations["autoscaling.knative.dev/max-scale"]`
)

// DefaultManager owns fields no configured manager claims: what kubectl
// apply records.
const DefaultManager = "kubectl-client-side-apply"

// ContainerAttr is the path of a container's memory request or limit
// (which: "requests" or "limits").
func ContainerAttr(container, which string) string {
	return "spec.template.spec.containers[name=" + container + "].resources." + which + ".memory"
}

// object is one API object of the world, with what the gate needs: the
// manager of each field, annotations and a generation.
type object struct {
	wl                    *workload // the workload it belongs to
	kind, namespace, name string
	attrs                 map[string]string
	managers              map[string]string
	managerOf             func(string) string
	annotations           map[string]string
	generation            int64 // bumped by every spec change
	templateGen           int64 // bumped by pod-template changes: a rollout
}

func (o *object) key() string { return o.kind + "/" + o.namespace + "/" + o.name }

// manager returns who owns attr.
func (o *object) manager(attr string) string {
	if m, ok := o.managers[attr]; ok {
		return m
	}
	return o.managerOf(attr)
}

// set changes one attribute as manager; it refuses what a real API server
// would refuse (unknown paths, status, malformed values).
func (o *object) set(attr, value, manager string) error {
	if strings.HasPrefix(attr, "status.") {
		return fmt.Errorf("%s: status is written by controllers, not applied", attr)
	}
	old, known := o.attrs[attr]
	switch {
	case attr == AttrReplicas || attr == AttrMinReplicas || attr == AttrMaxReplicas:
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return fmt.Errorf("%s: %q is not a non-negative integer", attr, value)
		}
		if attr == AttrMinReplicas && n < 1 {
			return fmt.Errorf("%s: must be at least 1", attr)
		}
	case attr == AttrMinScale || attr == AttrMaxScale:
		if n, err := strconv.Atoi(value); err != nil || n < 0 {
			return fmt.Errorf("%s: %q is not a non-negative integer", attr, value)
		}
		if o.kind != "KnativeService" {
			return fmt.Errorf("%s: only a KnativeService has it", attr)
		}
		known = true
	case strings.HasPrefix(attr, "spec.template.spec.containers["):
		if !known {
			return fmt.Errorf("%s: no such container", attr)
		}
		if _, err := spec.ParseBytes(value); err != nil {
			return fmt.Errorf("%s: %w", attr, err)
		}
	}
	if !known {
		return fmt.Errorf("%s: %s has no such attribute", attr, o.kind)
	}
	o.managers[attr] = manager
	if old == value {
		return nil
	}
	o.attrs[attr] = value
	o.generation++
	if strings.HasPrefix(attr, "spec.template.spec.") {
		o.templateGen++
	}
	return nil
}
