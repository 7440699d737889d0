package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// A fleet's cluster on Cluster API is two objects: the Cluster (its
// labels, its phase) and its one MachineDeployment (its node count, in
// spec.replicas). A new one is made from a template: a ClusterTemplate
// (setpoint.dev, deploy/crds) of the fleet's namespace named as the
// spec's clusterTemplate, holding a Cluster and a MachineDeployment;
// setpoint fills in names, labels, the cluster name and the replicas. (A
// resource of its own, not a ConfigMap: reading it needs no right to read
// every ConfigMap.)
var (
	gvrCAPICluster = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "clusters"}
	gvrMachineDep  = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machinedeployments"}
	gvrTemplate    = schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "clustertemplates"}
)

// Labels.
const (
	// LabelCAPIClusterName is Cluster API's label tying a
	// MachineDeployment to its Cluster.
	LabelCAPIClusterName = "cluster.x-k8s.io/cluster-name"
)

var (
	fpReplicas   = fieldpath.MakePathOrDie("spec", "replicas")
	pathMetadata = addrs.MustPath("metadata")
)

// capiObject is a cluster as the provider reports it, from its Cluster
// and its MachineDeployments.
func capiObject(a providers.Address, cl *unstructured.Unstructured, mds []unstructured.Unstructured) (providers.Object, error) {
	o := providers.Object{Address: a, Exists: true, Generation: cl.GetGeneration(), Labels: cl.GetLabels(), Annotations: cl.GetAnnotations(),
		Attributes: map[addrs.Path]values.Value{}, Managers: map[addrs.Path]string{}}
	if len(mds) > 1 {
		// Reported without a node count: the Fleet holds it, not the
		// others.
		return o, fmt.Errorf("cluster %s has %d MachineDeployments: setpoint sizes a cluster through exactly one", cl.GetName(), len(mds))
	}
	phase, _, _ := unstructured.NestedString(cl.Object, "status", "phase")
	if reason, _, _ := unstructured.NestedString(cl.Object, "status", "failureReason"); reason != "" || failedCondition(cl) {
		phase = cluster.PhaseFailed
	}
	if cl.GetDeletionTimestamp() != nil {
		phase = cluster.PhaseDeleting
	}
	if len(mds) == 1 {
		md := &mds[0]
		spec, ok, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
		if ok {
			o.Attributes[cluster.Nodes] = values.CountOf(spec)
		}
		st, _, _ := unstructured.NestedInt64(md.Object, "status", "replicas")
		ready, _, _ := unstructured.NestedInt64(md.Object, "status", "readyReplicas")
		o.Attributes[cluster.StatusNodes] = values.CountOf(st)
		o.Attributes[cluster.ReadyNodes] = values.CountOf(ready)
		if mp, _, _ := unstructured.NestedString(md.Object, "status", "phase"); (mp == cluster.PhaseScalingUp || mp == cluster.PhaseScalingDown) && phase == cluster.PhaseProvisioned {
			phase = mp
		}
		if m := managerOf(managedSets(md.GetManagedFields()), fpReplicas, "setpoint"); m != "" {
			o.Managers[cluster.Nodes] = m
		}
	}
	if phase != "" {
		o.Attributes[cluster.Phase] = values.StringOf(phase)
	}
	// Who manages the Cluster itself (a GitOps controller's is its to
	// delete).
	for _, m := range cl.GetManagedFields() {
		if m.Manager != "" && m.Manager != "setpoint" && m.Subresource == "" {
			o.Managers[pathMetadata] = m.Manager
			break
		}
	}
	return o, nil
}

// failedCondition reports a condition Cluster API marks false with
// severity Error (v1beta1: a failure its controllers will not fix).
func failedCondition(cl *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(cl.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["status"] == "False" && m["severity"] == "Error" {
			return true
		}
	}
	return false
}

// capiMDs lists a namespace's MachineDeployments by cluster name: all of
// them for a list of clusters, one cluster's (by Cluster API's label,
// which it sets on every MachineDeployment) for a read or a change.
func capiMDs(ctx context.Context, dyn dynamic.Interface, ns, one string) (map[string][]unstructured.Unstructured, error) {
	var opts metav1.ListOptions
	if one != "" {
		opts.LabelSelector = labels.SelectorFromSet(labels.Set{LabelCAPIClusterName: one}).String()
	}
	l, err := dyn.Resource(gvrMachineDep).Namespace(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("listing MachineDeployments in %s: %w", ns, err)
	}
	out := map[string][]unstructured.Unstructured{}
	for _, md := range l.Items {
		name := md.GetLabels()[LabelCAPIClusterName]
		if name == "" {
			name, _, _ = unstructured.NestedString(md.Object, "spec", "clusterName")
		}
		out[name] = append(out[name], md)
	}
	return out, nil
}

// capiList lists a fleet's clusters: one List of Clusters by label, one of
// MachineDeployments per namespace.
func (p *Provider) capiList(ctx context.Context, dyn dynamic.Interface, req providers.ListRequest) providers.ListResponse {
	var resp providers.ListResponse
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	l, err := dyn.Resource(gvrCAPICluster).Namespace(req.Namespace).List(cctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(req.Selector).String()})
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, diag.New("listing Cluster API Clusters", err.Error()))
		return resp
	}
	mdsByNS := map[string]map[string][]unstructured.Unstructured{}
	for i := range l.Items {
		cl := &l.Items[i]
		mds, ok := mdsByNS[cl.GetNamespace()]
		if !ok {
			if mds, err = capiMDs(cctx, dyn, cl.GetNamespace(), ""); err != nil {
				resp.Diagnostics = append(resp.Diagnostics, diag.New("listing Cluster API MachineDeployments", err.Error()))
				return resp
			}
			mdsByNS[cl.GetNamespace()] = mds
		}
		a := providers.Address{Provider: req.Provider, Kind: cluster.Kind, Namespace: cl.GetNamespace(), Name: cl.GetName()}
		o, err := capiObject(a, cl, mds[cl.GetName()])
		if err != nil {
			// One odd cluster is a warning: the list stands for the rest.
			resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: diag.Warning, Address: &a, Message: err.Error()})
		}
		resp.Objects = append(resp.Objects, o)
	}
	slices.SortFunc(resp.Objects, func(a, b providers.Object) int { return strings.Compare(a.Address.String(), b.Address.String()) })
	return resp
}

// capiRead reads one cluster.
func (p *Provider) capiRead(ctx context.Context, dyn dynamic.Interface, a providers.Address) (providers.Object, error) {
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cl, err := dyn.Resource(gvrCAPICluster).Namespace(a.Namespace).Get(cctx, a.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return providers.Object{Address: a}, nil
	}
	if err != nil {
		return providers.Object{}, fmt.Errorf("reading Cluster %s/%s: %w", a.Namespace, a.Name, err)
	}
	mds, err := capiMDs(cctx, dyn, a.Namespace, a.Name)
	if err != nil {
		return providers.Object{}, err
	}
	return capiObject(a, cl, mds[a.Name])
}

// capiChange makes one cluster change (or dry-runs it): a node count goes
// to the MachineDeployment's spec.replicas by a JSON patch that tests
// the count first (server-side apply on a custom resource's /scale
// answers 500); a new cluster is its
// template's Cluster and MachineDeployment; a delete deletes the Cluster
// (Cluster API deletes what it owns).
func (p *Provider) capiChange(ctx context.Context, dyn dynamic.Interface, c providers.ObjectChange, dryRun bool) providers.ObjectResult {
	res := providers.ObjectResult{Address: c.Address, After: c.Attributes}
	fail := func(err error) providers.ObjectResult {
		res.Err = err.Error()
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	for path := range c.Attributes {
		if path != cluster.Nodes && path != cluster.Template && !path.HasPrefix(addrs.MustPath("metadata.labels")) {
			return fail(fmt.Errorf("%s: a Cluster has no such attribute", path))
		}
	}
	ns, name := c.Address.Namespace, c.Address.Name
	switch c.Action {
	case action.Delete:
		cl, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(cctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return res
		}
		if err != nil {
			return fail(fmt.Errorf("reading Cluster %s/%s: %w", ns, name, err))
		}
		if cl.GetLabels()[cluster.LabelFleet] == "" {
			return fail(fmt.Errorf("the Cluster %s/%s has no %s label: setpoint deletes only a fleet's clusters", ns, name, cluster.LabelFleet))
		}
		uid := cl.GetUID()
		err = dyn.Resource(gvrCAPICluster).Namespace(ns).Delete(cctx, name, metav1.DeleteOptions{DryRun: dry, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fail(fmt.Errorf("deleting Cluster %s/%s: %w", ns, name, err))
		}
		return res
	case action.Create:
		cl, md, err := fromTemplate(cctx, dyn, c)
		if err != nil {
			return fail(err)
		}
		opts := metav1.CreateOptions{FieldManager: c.Manager, DryRun: dry}
		existing, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Get(cctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := dyn.Resource(gvrCAPICluster).Namespace(ns).Create(cctx, cl, opts); err != nil {
				return fail(fmt.Errorf("creating Cluster %s/%s: %w", ns, name, err))
			}
		case err != nil:
			return fail(fmt.Errorf("reading Cluster %s/%s: %w", ns, name, err))
		default:
			// A create never adopts a cluster: only one of this fleet
			// left without its MachineDeployment (a create cut short) is
			// finished here.
			mds, err := capiMDs(cctx, dyn, ns, name)
			if err != nil {
				return fail(err)
			}
			if f := existing.GetLabels()[cluster.LabelFleet]; f == "" || f != cl.GetLabels()[cluster.LabelFleet] || len(mds[name]) > 0 {
				return fail(fmt.Errorf("the Cluster %s/%s already exists: a new cluster needs a new name", ns, name))
			}
		}
		if _, err := dyn.Resource(gvrMachineDep).Namespace(ns).Create(cctx, md, opts); err != nil {
			return fail(fmt.Errorf("creating MachineDeployment %s/%s: %w (the next create of this cluster finishes it)", ns, md.GetName(), err))
		}
		return res
	}
	v, ok := c.Attributes[cluster.Nodes]
	if !ok {
		return res
	}
	if v.Type() != values.Count || v.Int() < 0 || v.Int() > 10000 {
		return fail(fmt.Errorf("%s: %s is not a node count", cluster.Nodes, v))
	}
	mds, err := capiMDs(cctx, dyn, ns, name)
	if err != nil {
		return fail(err)
	}
	switch n := len(mds[name]); n {
	case 0:
		return fail(fmt.Errorf("cluster %s/%s has no MachineDeployment", ns, name))
	case 1:
	default:
		return fail(fmt.Errorf("cluster %s/%s has %d MachineDeployments: setpoint sizes a cluster through exactly one", ns, name, n))
	}
	md := mds[name][0]
	if m := managerOf(managedSets(md.GetManagedFields()), fpReplicas, c.Manager); !c.Force && m != "" && m != c.Manager {
		res.Conflicts = []providers.Conflict{{Path: cluster.Nodes, Manager: m}}
		return fail(fmt.Errorf("conflict: %s (spec.replicas of MachineDeployment %s) is managed by %s", cluster.Nodes, md.GetName(), m))
	}
	// The test is of the count the plan saw (else the one read here): a
	// count another writer set since is refused, not overwritten. A status
	// write (frequent while machines come and go) does not move it, unlike
	// the resourceVersion.
	seen, has, _ := unstructured.NestedInt64(md.Object, "spec", "replicas")
	if s, ok := c.Seen[cluster.Nodes]; ok && has && s.Type() == values.Count {
		seen = s.Int()
	}
	patch := replicasPatch(seen, has, md.GetResourceVersion(), v.Int())
	if _, err := dyn.Resource(gvrMachineDep).Namespace(ns).Patch(cctx, md.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: c.Manager, DryRun: dry}); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
			return fail(fmt.Errorf("the replicas of MachineDeployment %s/%s moved from %d since they were read: not overwritten (%w)", ns, md.GetName(), seen, err))
		}
		return fail(fmt.Errorf("setting the replicas of MachineDeployment %s/%s: %w", ns, md.GetName(), err))
	}
	return res
}

// replicasPatch is a JSON patch that sets a MachineDeployment's replicas
// to want only while they are still seen: the API server applies it
// whole or refuses it when a test fails, so a count another writer set
// since it was seen is never overwritten (a merge patch would). Replicas
// unset (left to an autoscaler) cannot be tested: the resourceVersion is.
func replicasPatch(seen int64, has bool, resourceVersion string, want int64) []byte {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{"test", "/spec/replicas", seen}, {"replace", "/spec/replicas", want}}
	if !has {
		ops = []op{{"test", "/metadata/resourceVersion", resourceVersion}, {"add", "/spec/replicas", want}}
	}
	b, _ := json.Marshal(ops)
	return b
}

// fromTemplate builds a new cluster's Cluster and MachineDeployment from
// the ClusterTemplate the change names.
func fromTemplate(ctx context.Context, dyn dynamic.Interface, c providers.ObjectChange) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
	ns, name := c.Address.Namespace, c.Address.Name
	tmpl := c.Attributes[cluster.Template].String()
	if tmpl == "" {
		return nil, nil, fmt.Errorf("a new cluster needs %s", cluster.Template)
	}
	t, err := dyn.Resource(gvrTemplate).Namespace(ns).Get(ctx, tmpl, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("cluster template %q does not exist (a ClusterTemplate in namespace %s)", tmpl, ns)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading cluster template %s/%s: %w", ns, tmpl, err)
	}
	cl, err := manifest(t, "cluster", "Cluster")
	if err != nil {
		return nil, nil, err
	}
	md, err := manifest(t, "machineDeployment", "MachineDeployment")
	if err != nil {
		return nil, nil, err
	}
	lbls := map[string]string{}
	for path, v := range c.Attributes {
		if last := path.Last(); path.HasPrefix(addrs.MustPath("metadata.labels")) && last.Kind == addrs.MapKey {
			lbls[last.Name] = v.String()
		}
	}
	for _, u := range []*unstructured.Unstructured{cl, md} {
		u.SetNamespace(ns)
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range lbls {
			l[k] = v
		}
		u.SetLabels(l)
	}
	cl.SetName(name)
	md.SetName(name + "-md-0")
	ml := md.GetLabels()
	ml[LabelCAPIClusterName] = name
	md.SetLabels(ml)
	// Everything that names the cluster names the new one: its machines,
	// their selector, their cluster.
	for _, f := range []struct {
		v    any
		path []string
	}{
		{name, []string{"spec", "clusterName"}},
		{name, []string{"spec", "template", "spec", "clusterName"}},
		{name, []string{"spec", "template", "metadata", "labels", LabelCAPIClusterName}},
		{name, []string{"spec", "selector", "matchLabels", LabelCAPIClusterName}},
	} {
		if err := unstructured.SetNestedField(md.Object, f.v, f.path...); err != nil {
			return nil, nil, fmt.Errorf("cluster template %s/%s: %w", ns, tmpl, err)
		}
	}
	if v, ok := c.Attributes[cluster.Nodes]; ok {
		if v.Type() != values.Count || v.Int() < 0 || v.Int() > 10000 {
			return nil, nil, fmt.Errorf("%s: %s is not a node count", cluster.Nodes, v)
		}
		if err := unstructured.SetNestedField(md.Object, v.Int(), "spec", "replicas"); err != nil {
			return nil, nil, err
		}
	}
	return cl, md, nil
}

// manifest reads one object of a template, of the kind expected.
func manifest(t *unstructured.Unstructured, field, kind string) (*unstructured.Unstructured, error) {
	obj, ok, _ := unstructured.NestedMap(t.Object, "spec", field)
	if !ok {
		return nil, fmt.Errorf("cluster template %s/%s has no spec.%s", t.GetNamespace(), t.GetName(), field)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() != kind || u.GetAPIVersion() != gvrCAPICluster.GroupVersion().String() {
		return nil, fmt.Errorf("cluster template %s/%s, spec.%s: want a %s of %s, not %s %s", t.GetNamespace(), t.GetName(), field, kind, gvrCAPICluster.GroupVersion(), u.GetAPIVersion(), u.GetKind())
	}
	if kind == "Cluster" {
		// References are to one cluster's own objects: two clusters made
		// from one template would share them (and a delete take both's).
		for _, ref := range []string{"infrastructureRef", "controlPlaneRef"} {
			if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", ref); ok {
				return nil, fmt.Errorf("cluster template %s/%s: spec.cluster.spec.%s names one cluster's objects: use a ClusterClass (spec.topology)", t.GetNamespace(), t.GetName(), ref)
			}
		}
	}
	// What an object copied from a live one had is not the new one's.
	unstructured.RemoveNestedField(u.Object, "status")
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "ownerReferences", "generation", "finalizers", "generateName", "deletionGracePeriodSeconds", "deletionTimestamp"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	// Nor is a GitOps tool's mark of what it manages.
	if a := u.GetAnnotations(); a != nil {
		for k := range a {
			if strings.HasPrefix(k, "argocd.argoproj.io/") || strings.HasPrefix(k, "kustomize.toolkit.fluxcd.io/") || k == "kubectl.kubernetes.io/last-applied-configuration" {
				delete(a, k)
			}
		}
		u.SetAnnotations(a)
	}
	return u, nil
}
