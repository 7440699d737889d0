package kubernetes

import (
	"fmt"
	"k8s.io/client-go/dynamic"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// capiCluster writes a Cluster of fleet f and its MachineDeployment with
// replicas, then their status as Cluster API's controllers would.
func capiCluster(t *testing.T, env *kubetest.Env, ns, name, fleet string, replicas, ready int64, phase string) {
	t.Helper()
	env.Apply(t, fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: %[2]s, namespace: %[1]s, labels: {setpoint.dev/fleet: %[3]s, setpoint.dev/region: us-east-1, setpoint.dev/cloud: aws}}
spec: {clusterNetwork: {pods: {cidrBlocks: [10.0.0.0/16]}}}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: %[2]s-md-0, namespace: %[1]s, labels: {cluster.x-k8s.io/cluster-name: %[2]s}}
spec: {clusterName: %[2]s, replicas: %[4]d, template: {spec: {clusterName: %[2]s}}}
`, ns, name, fleet, replicas))
	dyn := env.Dynamic(t)
	setStatus := func(gvrName string, obj string, status map[string]any) {
		gvr := gvrCAPICluster
		if gvrName == "md" {
			gvr = gvrMachineDep
		}
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctxT(t), obj, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = status
		if _, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctxT(t), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus("cluster", name, map[string]any{"phase": phase})
	setStatus("md", name+"-md-0", map[string]any{"replicas": replicas, "readyReplicas": ready, "phase": "Running"})
}

const capiTemplate = `apiVersion: setpoint.dev/v1alpha1
kind: ClusterTemplate
metadata: {name: streaming-standard, namespace: %s}
spec:
  cluster:
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    metadata: {name: template, labels: {team: streaming}}
    spec: {clusterNetwork: {pods: {cidrBlocks: [10.0.0.0/16]}}, topology: {class: streaming, version: v1.35.4}}
  machineDeployment:
    apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    metadata: {name: template-md-0}
    spec: {clusterName: template, replicas: 1, template: {spec: {bootstrap: {configRef: {kind: KubeadmConfigTemplate, name: streaming}}}}}
`

// TestClusterAPI: the provider lists a fleet's clusters (node count from
// the MachineDeployment, status and phase from both), sets a node count on
// the MachineDeployment, creates a cluster from its template (a missing
// template refused, naming it) and deletes one.
func TestClusterAPI(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	capiCluster(t, env, ns, "east-a", "streaming", 6, 6, "Provisioned")
	capiCluster(t, env, ns, "east-b", "streaming", 3, 2, "Provisioned")
	capiCluster(t, env, ns, "other", "batch", 3, 3, "Provisioned")
	capiCluster(t, env, ns, "east-f", "streaming", 3, 0, "Failed")
	capiCluster(t, env, ns, "east-g", "streaming", 3, 3, "Provisioned")
	// east-g failed by a condition.
	dyn := env.Dynamic(t)
	g, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(ctxT(t), "east-g", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g.Object["status"] = map[string]any{"phase": "Provisioned", "conditions": []any{map[string]any{"type": "InfrastructureReady", "status": "False", "severity": "Error", "reason": "QuotaExceeded"}}}
	if _, err := dyn.Resource(gvrCAPICluster).Namespace(ns).UpdateStatus(ctxT(t), g, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, env.Config())
	list := func() map[string]providers.Object {
		t.Helper()
		resp := p.List(ctxT(t), providers.ListRequest{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Selector: map[string]string{cluster.LabelFleet: "streaming"}})
		if len(resp.Diagnostics) > 0 {
			t.Fatal(resp.Diagnostics)
		}
		out := map[string]providers.Object{}
		for _, o := range resp.Objects {
			out[o.Address.Name] = o
		}
		return out
	}
	got := list()
	if len(got) != 4 {
		t.Fatalf("listed %v: want east-a, east-b, east-f and east-g (other is another fleet's)", got)
	}
	for _, name := range []string{"east-f", "east-g"} {
		if f := got[name]; f.Attributes[cluster.Phase] != values.StringOf(cluster.PhaseFailed) {
			t.Errorf("%s: phase %s, want Failed", name, f.Attributes[cluster.Phase])
		}
	}
	a, b := got["east-a"], got["east-b"]
	if a.Attributes[cluster.Nodes] != values.CountOf(6) || a.Attributes[cluster.ReadyNodes] != values.CountOf(6) || a.Attributes[cluster.Phase] != values.StringOf("Provisioned") || a.Labels[cluster.LabelRegion] != "us-east-1" {
		t.Errorf("east-a: %v %v", a.Attributes, a.Labels)
	}
	if b.Attributes[cluster.ReadyNodes] != values.CountOf(2) || b.Managers[cluster.Nodes] == "" {
		t.Errorf("east-b: %v managers %v", b.Attributes, b.Managers)
	}

	// A node count: the MachineDeployment's replicas, taken with force.
	ch := providers.ObjectChange{Address: a.Address, Action: action.Update, Manager: "setpoint", Force: true,
		Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(9)}, Changed: []addrs.Path{cluster.Nodes}}
	if r := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{ch}}); r.Results[0].Err != "" {
		t.Fatalf("dry run: %s", r.Results[0].Err)
	}
	if n := list()["east-a"].Attributes[cluster.Nodes]; n != values.CountOf(6) {
		t.Fatalf("the dry run changed the node count to %s", n)
	}
	noForce := ch
	noForce.Force = false
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{noForce}}); r.Results[0].Err == "" || len(r.Results[0].Conflicts) != 1 {
		t.Fatalf("without force: %+v; want a conflict with the MachineDeployment's manager", r.Results[0])
	}
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{ch}}); r.Results[0].Err != "" {
		t.Fatalf("apply: %s", r.Results[0].Err)
	}
	a = list()["east-a"]
	if a.Attributes[cluster.Nodes] != values.CountOf(9) || a.Managers[cluster.Nodes] != "setpoint" {
		t.Fatalf("after the apply: %v managers %v", a.Attributes, a.Managers)
	}

	// A new cluster from a template; without the template, refused.
	create := providers.ObjectChange{Address: providers.Address{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Name: "streaming-us-east-1-1"}, Action: action.Create, Manager: "setpoint",
		Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(3), cluster.Template: values.StringOf("streaming-standard"),
			cluster.LabelPath(cluster.LabelFleet): values.StringOf("streaming"), cluster.LabelPath(cluster.LabelRegion): values.StringOf("us-east-1")},
		Changed: []addrs.Path{cluster.Nodes}}
	if r := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{create}}); !strings.Contains(r.Results[0].Err, `cluster template "streaming-standard" does not exist`) {
		t.Fatalf("without the template: %q", r.Results[0].Err)
	}
	env.Apply(t, fmt.Sprintf(capiTemplate, ns))
	if r := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{create}}); r.Results[0].Err != "" {
		t.Fatalf("dry run of the create: %s", r.Results[0].Err)
	}
	if _, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(ctxT(t), "streaming-us-east-1-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run created the Cluster: %v", err)
	}
	// A create never adopts: another fleet's cluster of that name is
	// refused, not resized.
	taken := create
	taken.Address.Name = "other"
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{taken}}); !strings.Contains(r.Results[0].Err, "already exists") {
		t.Fatalf("create onto another fleet's cluster: %q", r.Results[0].Err)
	}
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{create}}); r.Results[0].Err != "" {
		t.Fatalf("create: %s", r.Results[0].Err)
	}
	cl, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(ctxT(t), "streaming-us-east-1-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	class, _, _ := unstructured.NestedString(cl.Object, "spec", "topology", "class")
	if cl.GetLabels()[cluster.LabelFleet] != "streaming" || cl.GetLabels()["team"] != "streaming" || class != "streaming" {
		t.Errorf("created Cluster: labels %v, class %q", cl.GetLabels(), class)
	}
	md, err := dyn.Resource(gvrMachineDep).Namespace(ns).Get(ctxT(t), "streaming-us-east-1-1-md-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	clusterName, _, _ := unstructured.NestedString(md.Object, "spec", "clusterName")
	machines, _, _ := unstructured.NestedString(md.Object, "spec", "template", "spec", "clusterName")
	selector, _, _ := unstructured.NestedString(md.Object, "spec", "selector", "matchLabels", LabelCAPIClusterName)
	if replicas != 3 || clusterName != "streaming-us-east-1-1" || machines != clusterName || selector != clusterName || md.GetLabels()[LabelCAPIClusterName] != "streaming-us-east-1-1" {
		t.Errorf("created MachineDeployment: replicas %d, cluster %q, machines' cluster %q, selector %q, labels %v", replicas, clusterName, machines, selector, md.GetLabels())
	}
	if len(list()) != 5 {
		t.Errorf("the new cluster is not listed with its fleet")
	}

	// A template naming one cluster's own objects is refused.
	env.Apply(t, fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: ClusterTemplate
metadata: {name: by-ref, namespace: %s}
spec:
  cluster: {apiVersion: cluster.x-k8s.io/v1beta1, kind: Cluster, metadata: {name: t}, spec: {infrastructureRef: {kind: AWSCluster, name: prod-a}}}
  machineDeployment: {apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineDeployment, metadata: {name: t}}
`, ns))
	byRef := create
	byRef.Address.Name, byRef.Attributes = "by-ref-1", map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(3), cluster.Template: values.StringOf("by-ref"), cluster.LabelPath(cluster.LabelFleet): values.StringOf("streaming")}
	if r := p.PlanChange(ctxT(t), providers.PlanChangeRequest{Changes: []providers.ObjectChange{byRef}}); !strings.Contains(r.Results[0].Err, "infrastructureRef") {
		t.Fatalf("a template by reference: %q", r.Results[0].Err)
	}

	// A Cluster without a fleet label is not deleted.
	env.Apply(t, fmt.Sprintf("apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata: {name: mine, namespace: %s}\n", ns))
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{{Address: providers.Address{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Name: "mine"}, Action: action.Delete, Manager: "setpoint"}}}); !strings.Contains(r.Results[0].Err, "no setpoint.dev/fleet label") {
		t.Fatalf("delete of a cluster of no fleet: %q", r.Results[0].Err)
	}

	// A delete deletes the Cluster.
	del := providers.ObjectChange{Address: b.Address, Action: action.Delete, Manager: "setpoint"}
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{del}}); r.Results[0].Err != "" {
		t.Fatalf("delete: %s", r.Results[0].Err)
	}
	if _, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(ctxT(t), "east-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("east-b after its delete: %v", err)
	}
}

// TestClusterAPIReplicasPatchTests: a node count goes to the
// MachineDeployment by a JSON patch that tests the count it was seen at:
// the API server refuses it whole when another writer moved the count
// since, and the provider's change says so.
func TestClusterAPIReplicasPatchTests(t *testing.T) {
	for _, c := range []struct {
		seen, want int64
		has        bool
		json       string
	}{
		{6, 9, true, `[{"op":"test","path":"/spec/replicas","value":6},{"op":"replace","path":"/spec/replicas","value":9}]`},
		{0, 3, false, `[{"op":"test","path":"/metadata/resourceVersion","value":"42"},{"op":"add","path":"/spec/replicas","value":3}]`},
	} {
		if got := string(replicasPatch(c.seen, c.has, "42", c.want)); got != c.json {
			t.Errorf("replicasPatch(%d, %v, 42, %d) = %s, want %s", c.seen, c.has, c.want, got, c.json)
		}
	}

	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	capiCluster(t, env, ns, "east-a", "streaming", 6, 6, "Provisioned")
	dyn := env.Dynamic(t)
	replicas := func() int64 { t.Helper(); return mdReplicas(t, dyn, ns, "east-a-md-0") }
	// Seen at 5, but someone set 6 since: refused, 6 stays.
	_, err := dyn.Resource(gvrMachineDep).Namespace(ns).Patch(ctxT(t), "east-a-md-0", types.JSONPatchType, replicasPatch(5, true, "", 9), metav1.PatchOptions{FieldManager: "setpoint"})
	if err == nil || replicas() != 6 {
		t.Fatalf("a patch of a count seen at 5 when it is 6: err %v, replicas %d; want refused, 6", err, replicas())
	}
	if _, err := dyn.Resource(gvrMachineDep).Namespace(ns).Patch(ctxT(t), "east-a-md-0", types.JSONPatchType, replicasPatch(6, true, "", 9), metav1.PatchOptions{FieldManager: "setpoint"}); err != nil || replicas() != 9 {
		t.Fatalf("a patch of a count seen at 6: err %v, replicas %d; want 9", err, replicas())
	}
	// Through the provider: the count it reads is the one it tests.
	p := newProvider(t, env.Config())
	ch := providers.ObjectChange{Address: providers.Address{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Name: "east-a"}, Action: action.Update, Manager: "setpoint", Force: true,
		Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(12)}, Changed: []addrs.Path{cluster.Nodes}}
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{ch}}); r.Results[0].Err != "" || replicas() != 12 {
		t.Fatalf("apply: %q, replicas %d; want 12", r.Results[0].Err, replicas())
	}
}

// TestClusterAPIPatchTestsThePlansCount: a change carrying the count the
// plan saw is refused when the MachineDeployment's replicas moved since,
// even though the provider reads the new count itself.
func TestClusterAPIPatchTestsThePlansCount(t *testing.T) {
	env := kubetest.Shared(t)
	ns := env.Namespace(t)
	capiCluster(t, env, ns, "east-a", "streaming", 6, 6, "Provisioned")
	dyn := env.Dynamic(t)
	replicas := func() int64 { t.Helper(); return mdReplicas(t, dyn, ns, "east-a-md-0") }
	p := newProvider(t, env.Config())
	change := func(seen int64) providers.ObjectChange {
		return providers.ObjectChange{Address: providers.Address{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Name: "east-a"}, Action: action.Update, Manager: "setpoint", Force: true,
			Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(9)}, Changed: []addrs.Path{cluster.Nodes},
			Seen: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(seen)}}
	}
	// The plan saw 3; someone set 6 since.
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{change(3)}}); !strings.Contains(r.Results[0].Err, "moved from 3 since") || replicas() != 6 {
		t.Fatalf("a change planned from 3 when the count is 6: %q, replicas %d; want refused, 6", r.Results[0].Err, replicas())
	}
	if r := p.Apply(ctxT(t), providers.ApplyRequest{Changes: []providers.ObjectChange{change(6)}}); r.Results[0].Err != "" || replicas() != 9 {
		t.Fatalf("a change planned from 6: %q, replicas %d; want 9", r.Results[0].Err, replicas())
	}
}

// mdReplicas reads a MachineDeployment's spec.replicas.
func mdReplicas(t *testing.T, dyn dynamic.Interface, ns, name string) int64 {
	t.Helper()
	md, err := dyn.Resource(gvrMachineDep).Namespace(ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	return n
}
