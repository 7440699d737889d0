// Package workload is the vocabulary of workload objects that deciders
// write and providers serve: one attribute path per field, the same on the
// sim world and on Kubernetes, so one spec directory plans the same on
// both. Paths follow the Kubernetes field paths (an annotation is a map
// key, a container a [name=x] selector).
package workload

import "github.com/setpoint-dev/setpoint/engine/addrs"

// Kinds of workload objects.
const (
	Deployment = "Deployment"
	HPA        = "HorizontalPodAutoscaler"
	Knative    = "KnativeService"
	Pod        = "Pod"
)

// Attribute paths.
var (
	Replicas      = addrs.MustPath("spec.replicas")
	ReadyReplicas = addrs.MustPath("status.readyReplicas")
	// PodIP is a pod's address (a RouteGroup's selector lists pods).
	PodIP = addrs.MustPath("status.podIP")
	// PodReady is its Ready condition ("True" when it passes its
	// readiness probe): a backend that is not ready gets no traffic.
	PodReady        = addrs.MustPath("status.conditions[type=Ready].status")
	MinReplicas     = addrs.MustPath("spec.minReplicas")
	MaxReplicas     = addrs.MustPath("spec.maxReplicas")
	CurrentReplicas = addrs.MustPath("status.currentReplicas")
	DesiredReplicas = addrs.MustPath("status.desiredReplicas")
	// TargetCPU is an HPA's CPU utilisation target in percent, named as
	// autoscaling/v1 names it.
	TargetCPU = addrs.MustPath("spec.targetCPUUtilizationPercentage")
	// ScaleDownWindow is an HPA's scale-down stabilization window in
	// seconds (autoscaling/v2 behavior; 300 when unset): how long it keeps
	// the highest recommendation before scaling down.
	ScaleDownWindow = addrs.MustPath("spec.behavior.scaleDown.stabilizationWindowSeconds")
	MinScale        = addrs.MustPath(`spec.template.metadata.annotations["autoscaling.knative.dev/min-scale"]`)
	MaxScale        = addrs.MustPath(`spec.template.metadata.annotations["autoscaling.knative.dev/max-scale"]`)
	// Containers is where a pod template's containers are.
	Containers = addrs.MustPath("spec.template.spec.containers")
	// Status is where controllers write; nothing there is applied.
	Status = addrs.MustPath("status")
)

// ContainerAttr is the path of a pod template container's memory request
// or limit (which: "requests" or "limits").
func ContainerAttr(container, which string) addrs.Path {
	return ContainerAttrAt(Containers, container, which)
}

// ContainerAttrAt is ContainerAttr for the containers at base (a pod's
// own spec.containers).
func ContainerAttrAt(base addrs.Path, container, which string) addrs.Path {
	return base.Child(addrs.Sel("name", container), addrs.F("resources"), addrs.F(which), addrs.F("memory"))
}
