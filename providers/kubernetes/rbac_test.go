package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/kubetest"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
)

// capiFleetFixture is a fleet's one Cluster API cluster and its template.
const capiFleetFixture = `apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: east-a, namespace: %[1]s, labels: {setpoint.dev/fleet: streaming}}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: east-a-md-0, namespace: %[1]s, labels: {cluster.x-k8s.io/cluster-name: east-a}}
spec: {clusterName: east-a, replicas: 3}
---
apiVersion: setpoint.dev/v1alpha1
kind: ClusterTemplate
metadata: {name: standard, namespace: %[1]s}
spec:
  cluster: {apiVersion: cluster.x-k8s.io/v1beta1, kind: Cluster, metadata: {name: t}}
  machineDeployment: {apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineDeployment, metadata: {name: t}, spec: {replicas: 1}}
`

// roles reads deploy/rbac.yaml's ClusterRole and Role.
func roles(t *testing.T) (workloads, st *rbacv1.ClusterRole) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		var r rbacv1.ClusterRole // a Role has the same rules
		switch head.Kind {
		case "ClusterRole":
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			workloads = &r
		case "Role":
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatal(err)
			}
			st = &r
		}
	}
	if workloads == nil || st == nil {
		t.Fatal("deploy/rbac.yaml: want a ClusterRole and a Role")
	}
	return workloads, st
}

// The RBAC of deploy/ is enough for everything setpoint does in a cluster,
// and every verb in it is needed: without any one of them, something
// fails.
func TestRBACIsEnoughAndEachVerbNeeded(t *testing.T) {
	env := kubetest.Shared(t)
	admin := env.Clientset(t)
	ctx := context.Background()
	stateNS := env.Namespace(t)
	sa := "system:serviceaccount:" + stateNS + ":setpoint"
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + stateNS, "system:authenticated"}
	workloads, stateRole := roles(t)
	suffix := strings.ToLower(stateNS)
	crName := "setpoint-workloads-" + suffix
	put := func(w, s []rbacv1.PolicyRule) {
		t.Helper()
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: w}
		if _, err := admin.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			if _, err := admin.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "setpoint-state", Namespace: stateNS}, Rules: s}
		if _, err := admin.RbacV1().Roles(stateNS).Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			if _, err := admin.RbacV1().Roles(stateNS).Create(ctx, r, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(workloads.Rules, stateRole.Rules)
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoles().Delete(ctx, crName, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, crName, metav1.DeleteOptions{})
	})
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "setpoint", Namespace: stateNS}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crName},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: crName}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(stateNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "setpoint-state", Namespace: stateNS},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "setpoint-state"}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// settled waits until the authorizer answers for the rules as written:
	// every (verb, resource) of want allowed and the one removed denied.
	settled := func(w, s []rbacv1.PolicyRule, removed *authzv1.ResourceAttributes) {
		t.Helper()
		check := func(ra authzv1.ResourceAttributes) bool {
			r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: sa, Groups: groups, ResourceAttributes: &ra}}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok := true
			for _, rules := range []struct {
				ns    string
				rules []rbacv1.PolicyRule
			}{{"", w}, {stateNS, s}} {
				for _, r := range rules.rules {
					for _, v := range r.Verbs {
						res, sub, _ := strings.Cut(r.Resources[0], "/")
						ok = ok && check(authzv1.ResourceAttributes{Namespace: rules.ns, Verb: v, Group: r.APIGroups[0], Resource: res, Subresource: sub})
					}
				}
			}
			if removed != nil {
				ok = ok && !check(*removed)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the authorizer did not settle on the rules")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	settled(workloads.Rules, stateRole.Rules, nil)
	if err := everything(t, env, env.ConfigAs(sa, groups...), stateNS); err != nil {
		t.Fatalf("with deploy/rbac.yaml: %v", err)
	}
	for _, side := range []string{"workloads", "state"} {
		rules := workloads.Rules
		if side == "state" {
			rules = stateRole.Rules
		}
		for i, r := range rules {
			for j, verb := range r.Verbs {
				less := make([]rbacv1.PolicyRule, len(rules))
				for k := range rules {
					less[k] = *rules[k].DeepCopy()
				}
				less[i].Verbs = append(append([]string{}, r.Verbs[:j]...), r.Verbs[j+1:]...)
				if len(less[i].Verbs) == 0 {
					less = append(less[:i], less[i+1:]...) // a rule needs a verb
				}
				w, s := workloads.Rules, stateRole.Rules
				ns := ""
				if side == "workloads" {
					w = less
				} else {
					s, ns = less, stateNS
				}
				res, sub, _ := strings.Cut(r.Resources[0], "/")
				put(w, s)
				settled(w, s, &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: r.APIGroups[0], Resource: res, Subresource: sub})
				if err := everything(t, env, env.ConfigAs(sa, groups...), stateNS); err == nil {
					t.Errorf("%s %s %s: not needed (everything works without it)", side, verb, r.Resources[0])
				} else {
					t.Logf("without %s %s: %v", verb, r.Resources[0], firstLine(err))
				}
			}
		}
	}
	put(workloads.Rules, stateRole.Rules)
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// everything does, as the user of rc, what setpoint does in a cluster: on
// fresh objects in a new namespace, reads (one List for many), applies,
// creates an HPA, sets a Knative annotation, resizes pods in place,
// records Events; and in the state namespace, loads, saves, removes and
// locks state.
func everything(t *testing.T, env *kubetest.Env, as *rest.Config, stateNS string) error {
	t.Helper()
	ctx := context.Background()
	cfg := env.Config()
	ns := env.Namespace(t)
	d := fixture(t, env, ns)
	p, err := k8sprov.NewForConfig(as)
	if err != nil {
		return err
	}
	a := func(kind, name string) providers.Address {
		return providers.Address{Provider: "kubernetes", Kind: kind, Namespace: ns, Name: name}
	}
	var reads []providers.Address
	for _, kind := range []string{"Deployment", "HorizontalPodAutoscaler", "KnativeService", "NodeAgentConfig"} {
		for _, name := range []string{"web", "x1", "x2", "x3"} {
			reads = append(reads, a(kind, name))
		}
	}
	resp := p.Read(ctx, providers.ReadRequest{Addresses: reads})
	if len(resp.Diagnostics) > 0 {
		return fmt.Errorf("read: %v", resp.Diagnostics[0].Message)
	}
	one := func(kind, name string) error {
		resp := p.Read(ctx, providers.ReadRequest{Addresses: []providers.Address{a(kind, name)}})
		if len(resp.Diagnostics) > 0 {
			return fmt.Errorf("read %s: %v", kind, resp.Diagnostics[0].Message)
		}
		return nil
	}
	for _, kind := range []string{"Deployment", "HorizontalPodAutoscaler", "KnativeService"} {
		if err := one(kind, "web"); err != nil {
			return err
		}
	}
	agentConfig, _ := values.StructuredOf([]byte(`{"pools":[]}`))
	req, lim := k8sprov.ContainerAttr("app", "requests"), k8sprov.ContainerAttr("app", "limits")
	changes := []providers.ObjectChange{
		{Address: a("Deployment", "web"), Action: action.Update, Manager: k8sprov.Manager, Force: true, InPlace: providers.InPlaceFallbackHold,
			Attributes: map[addrs.Path]values.Value{k8sprov.AttrReplicas: values.CountOf(3), req: values.BytesOf(320 << 20), lim: values.BytesOf(480 << 20)},
			Changed:    []addrs.Path{k8sprov.AttrReplicas, req, lim}},
		{Address: a("HorizontalPodAutoscaler", "web"), Action: action.Create, Manager: k8sprov.Manager,
			Attributes: map[addrs.Path]values.Value{k8sprov.AttrMinReplicas: values.CountOf(2), k8sprov.AttrMaxReplicas: values.CountOf(9), k8sprov.AttrTargetCPU: values.CountOf(70)},
			Changed:    []addrs.Path{k8sprov.AttrMinReplicas}},
		{Address: a("KnativeService", "web"), Action: action.Update, Manager: k8sprov.Manager, Force: true,
			Attributes: map[addrs.Path]values.Value{k8sprov.AttrMinScale: values.CountOf(2)}, Changed: []addrs.Path{k8sprov.AttrMinScale}},
		{Address: a("NodeAgentConfig", "web"), Action: action.Create, Manager: k8sprov.Manager,
			Attributes: map[addrs.Path]values.Value{k8sprov.AttrAgent: values.StringOf("nri"), k8sprov.AttrAgentConfig: agentConfig},
			Changed:    []addrs.Path{k8sprov.AttrAgentConfig}},
	}
	for _, r := range p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: changes}).Results {
		if r.Err != "" {
			return fmt.Errorf("apply %s: %s", r.Address, r.Err)
		}
	}
	// The HPA and the NodeAgentConfig again, now that they exist: updates
	// (a read of one and a server-side apply each).
	upd := changes[1]
	upd.Action, upd.Attributes = action.Update, map[addrs.Path]values.Value{k8sprov.AttrMinReplicas: values.CountOf(3)}
	agentConfig2, _ := values.StructuredOf([]byte(`{"pools":[{"name":"a"}]}`))
	nac := changes[3]
	nac.Action, nac.Attributes = action.Update, map[addrs.Path]values.Value{k8sprov.AttrAgent: values.StringOf("nri"), k8sprov.AttrAgentConfig: agentConfig2}
	for _, r := range p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{upd, nac}}).Results {
		if r.Err != "" {
			return fmt.Errorf("apply %s: %s", r.Address, r.Err)
		}
	}
	if err := one("NodeAgentConfig", "web"); err != nil {
		return err
	}
	// A fleet on Cluster API: its clusters listed, one read, a node count
	// set, a cluster made from its template, one deleted.
	env.Apply(t, fmt.Sprintf(capiFleetFixture, ns))
	if lr := p.List(ctx, providers.ListRequest{Provider: "kubernetes", Kind: cluster.Kind, Namespace: ns, Selector: map[string]string{cluster.LabelFleet: "streaming"}}); len(lr.Diagnostics) > 0 || len(lr.Objects) != 1 {
		return fmt.Errorf("list clusters: %v (%d listed)", lr.Diagnostics, len(lr.Objects))
	}
	if err := one(cluster.Kind, "east-a"); err != nil {
		return err
	}
	fleetChanges := []providers.ObjectChange{
		{Address: a(cluster.Kind, "east-a"), Action: action.Update, Manager: k8sprov.Manager, Force: true,
			Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(6)}, Changed: []addrs.Path{cluster.Nodes}},
		{Address: a(cluster.Kind, "east-new"), Action: action.Create, Manager: k8sprov.Manager,
			Attributes: map[addrs.Path]values.Value{cluster.Nodes: values.CountOf(3), cluster.Template: values.StringOf("standard"),
				cluster.LabelPath(cluster.LabelFleet): values.StringOf("streaming")}, Changed: []addrs.Path{cluster.Nodes}},
	}
	for _, r := range p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: fleetChanges}).Results {
		if r.Err != "" {
			return fmt.Errorf("apply %s: %s", r.Address, r.Err)
		}
	}
	del := providers.ObjectChange{Address: a(cluster.Kind, "east-a"), Action: action.Delete, Manager: k8sprov.Manager}
	if r := p.Apply(ctx, providers.ApplyRequest{Now: time.Now(), Changes: []providers.ObjectChange{del}}).Results[0]; r.Err != "" {
		return fmt.Errorf("delete %s: %s", r.Address, r.Err)
	}
	adm := kubernetes.NewForConfigOrDie(cfg)
	pod, err := adm.CoreV1().Pods(ns).Get(ctx, d+"-pod", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if m := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; m.Value() != 320<<20 {
		return fmt.Errorf("the pod was not resized: %s", m.String())
	}
	evs, err := adm.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(evs.Items) < 6 {
		return fmt.Errorf("%d events recorded, want 6", len(evs.Items))
	}
	// State: load, save (create), save (update), save (remove), lock.
	b := kstate.New(kubernetes.NewForConfigOrDie(as), stateNS, "rbac-"+ns)
	s, err := b.Load(ctx)
	if err != nil {
		return err
	}
	at := addrs.Attr{Object: addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: ns, Name: "web"}, Path: addrs.MustPath("spec.replicas")}
	for _, n := range []int64{2, 3} {
		v := values.CountOf(n)
		s.Entry(at).User = &v
		if _, err := b.Save(ctx, s); err != nil {
			return err
		}
	}
	s.Delete(at)
	if st, err := b.Save(ctx, s); err != nil || st.Removed != 1 {
		return errors.Join(err, fmt.Errorf("removing state: %+v", st))
	}
	b.Shards = 2
	unlock, err := b.Lock(ctx, "rbac test", false)
	if err != nil {
		return err
	}
	if err := unlock(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	// Again: the Leases exist now, so this takes them by update.
	unlock, err = b.Lock(ctx, "rbac test", false)
	if err != nil {
		return err
	}
	if err := unlock(); err != nil {
		return err
	}
	// A replica: it takes shards, and when it stops it gives them back and
	// deletes its member Lease.
	hb := kstate.New(kubernetes.NewForConfigOrDie(as), stateNS, "rbac-"+ns)
	hb.Shards = 2
	h := hb.NewHolder("rbac test")
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(hctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.Owned()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	took := len(h.Owned())
	cancel()
	<-done
	if took < 2 {
		// Without this, a replica that takes nothing would pass as one
		// that gave everything back.
		return fmt.Errorf("the replica took %d of 2 shards", took)
	}
	if len(h.Owned()) != 0 {
		return fmt.Errorf("the replica kept %v", h.Owned())
	}
	leases, err := adm.CoordinationV1().Leases(stateNS).List(ctx, metav1.ListOptions{LabelSelector: kstate.LabelLock + "=member," + kstate.LabelEnvironment + "=rbac-" + ns})
	if err != nil {
		return err
	}
	if len(leases.Items) != 0 {
		return fmt.Errorf("the replica's member Lease was not deleted")
	}
	got := 0
	for i := range 2 {
		if l, err := adm.CoordinationV1().Leases(stateNS).Get(ctx, hb.ShardLease(i), metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
			got++
		}
	}
	if got != 2 {
		return fmt.Errorf("the replica took %d of 2 shards", got)
	}
	return nil
}

// fixture makes, as the admin, a Deployment "web" (as kubectl creates
// it), a ReplicaSet it controls with one pod, and a Knative Service "web".
func fixture(t *testing.T, env *kubetest.Env, ns string) string {
	t.Helper()
	ctx := context.Background()
	dyn := env.Dynamic(t)
	var dep map[string]any
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1, resources: {requests: {memory: 256Mi}, limits: {memory: 512Mi}}}]}
`, ns)), &dep); err != nil {
		t.Fatal(err)
	}
	d, err := dyn.Resource(gvrs["Deployment"]).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: dep}, metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"})
	if err != nil {
		t.Fatal(err)
	}
	rs := env.Apply(t, fmt.Sprintf(`apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-1
  namespace: %s
  labels: {app: web}
  annotations: {deployment.kubernetes.io/revision: "1"}
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: web, uid: %s, controller: true}]
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: registry.example/web:1}]}
`, ns, d.GetUID()))[0]
	env.Apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web-pod
  namespace: %s
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-1, uid: %s, controller: true}]
spec: {containers: [{name: app, image: registry.example/web:1, resources: {requests: {memory: 256Mi}, limits: {memory: 512Mi}}}]}
---
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: web, namespace: %s}
spec: {template: {spec: {containers: [{name: app, image: registry.example/web:1}]}}}
`, ns, rs.GetUID(), ns))
	return "web"
}

// Every manifest of deploy/ is accepted by the API server (a server-side
// dry run of its creation: schema, defaults and validation).
func TestDeployManifestsAccepted(t *testing.T) {
	env := kubetest.Shared(t)
	ctx := context.Background()
	admin := env.Clientset(t)
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "setpoint-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(admin.Discovery()))
	files, err := filepath.Glob("../../deploy/*.yaml")
	crds, _ := filepath.Glob("../../deploy/crds/*.yaml")
	files = append(files, crds...)
	if err != nil || len(files) < 5 {
		t.Fatalf("deploy/: %v %v", files, err)
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			gvk := u.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, gvk, err)
			}
			var rc dynamic.ResourceInterface = env.Dynamic(t).Resource(m.Resource)
			if m.Scope.Name() == apimeta.RESTScopeNameNamespace {
				rc = env.Dynamic(t).Resource(m.Resource).Namespace(u.GetNamespace())
			}
			if _, err := rc.Create(ctx, &u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("%s: %s %s: %v", f, gvk.Kind, u.GetName(), err)
			}
			n++
		}
	}
	if n < 10 {
		t.Fatalf("only %d objects in deploy/", n)
	}
}
