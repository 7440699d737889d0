// Package cluster is the vocabulary of a fleet's cluster objects, the same
// on the sim world and on Cluster API: the Fleet kind writes it, providers
// serve it. A cluster is listed by its fleet's label; its node count is
// one attribute (Cluster API: its MachineDeployment's spec.replicas).
package cluster

import "github.com/setpoint-dev/setpoint/engine/addrs"

// Kind of a fleet's cluster objects.
const Kind = "Cluster"

// Attribute paths.
var (
	// Nodes is the node count asked for.
	Nodes = addrs.MustPath("spec.nodes")
	// Template names what a new cluster is made from (create only).
	Template = addrs.MustPath("spec.template")
	// StatusNodes and ReadyNodes are the nodes that exist and are ready.
	StatusNodes = addrs.MustPath("status.nodes")
	ReadyNodes  = addrs.MustPath("status.readyNodes")
	// Phase is the provider's word for the cluster's life: see Phase*.
	Phase = addrs.MustPath("status.phase")
)

// Labels a fleet's clusters carry (set at creation, used to list them).
const (
	LabelFleet   = "setpoint.dev/fleet"
	LabelCloud   = "setpoint.dev/cloud"
	LabelRegion  = "setpoint.dev/region"
	LabelMultiAZ = "setpoint.dev/multi-az"
)

// LabelPath is the attribute path of a label, for a created object.
func LabelPath(name string) addrs.Path {
	return addrs.MustPath(`metadata.labels["` + name + `"]`)
}

// Phases, as Cluster API names them (a provider maps its own).
const (
	PhaseProvisioning = "Provisioning"
	PhaseProvisioned  = "Provisioned"
	PhaseScalingUp    = "ScalingUp"
	PhaseScalingDown  = "ScalingDown"
	PhaseFailed       = "Failed"
	PhaseDeleting     = "Deleting"
)
