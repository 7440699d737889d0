package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/setpoint-dev/setpoint/providers"
)

// memoryOf is what a change moves of each container's memory: request and
// limit in bytes (0 where the change does not move it). Only what it moves:
// a value carried from the state may no longer be setpoint's, and the
// template keeps the other manager's then (applyConfig), so the pods must
// too.
func memoryOf(c providers.ObjectChange) map[string][2]int64 {
	out := map[string][2]int64{}
	for i, which := range []string{"requests", "limits"} {
		for path, v := range c.Attributes {
			if !slices.Contains(c.Changed, path) {
				continue
			}
			name, ok := path.Selected("name")
			if !ok || path != ContainerAttr(name, which) {
				continue
			}
			m := out[name]
			m[i] = v.Int()
			out[name] = m
		}
	}
	return out
}

// resizePods applies a change's container memory to the running pods of a
// Deployment through the pods/resize subresource, request and limit
// together. A pod whose QoS class the new values would change is refused,
// as the API server would refuse it; a Guaranteed pod keeps request =
// limit (at the request, which is above the working set by the headroom).
func (p *Provider) resizePods(call func() context.Context, core k8s.Interface, c providers.ObjectChange, live *unstructured.Unstructured) error {
	want := memoryOf(c)
	if len(want) == 0 {
		return nil
	}
	if c.Address.Kind != KindDeployment {
		return fmt.Errorf("in-place resize is done for Deployments' pods, not a %s's", c.Address.Kind)
	}
	sel, ok, _ := unstructured.NestedStringMap(live.Object, "spec", "selector", "matchLabels")
	if !ok || len(sel) == 0 {
		return errors.New("the Deployment has no matchLabels selector to find its pods by")
	}
	// The Deployment's pods are those of its ReplicaSets: labels alone
	// would take a canary's pods that share them.
	selector := labels.SelectorFromSet(sel).String()
	rss, err := core.AppsV1().ReplicaSets(c.Address.Namespace).List(call(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("list replicasets.apps in namespace %s: %w", c.Address.Namespace, err)
	}
	mine := map[types.UID]bool{}
	for _, rs := range rss.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == live.GetUID() {
			mine[rs.UID] = true
		}
	}
	pods, err := core.CoreV1().Pods(c.Address.Namespace).List(call(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return explain(err, "list", kinds[KindPod], c.Address.Namespace)
	}
	// Every pod is checked before any is resized: a pod that cannot take
	// the new memory leaves them all as they are.
	var next []*corev1.Pod
	var errs []error
	for i := range pods.Items {
		pod := &pods.Items[i]
		if ref := metav1.GetControllerOf(pod); ref == nil || !mine[ref.UID] {
			continue
		}
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		n, changed, err := resized(pod, want)
		switch {
		case err != nil && len(errs) < maxPodErrors:
			errs = append(errs, fmt.Errorf("pod %s: %w", pod.Name, err))
		case err == nil && changed:
			next = append(next, n)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range next {
		if _, err := core.CoreV1().Pods(n.Namespace).UpdateResize(call(), n.Name, n, metav1.UpdateOptions{FieldManager: c.Manager}); err != nil && len(errs) < maxPodErrors {
			errs = append(errs, fmt.Errorf("pod %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ResizePausedAnnotation marks a Deployment an in-place resize paused, with
// the time it did (RFC 3339). Read reports one that is still there after
// resizeGrace provider timeouts as an apply to repair, and the next apply
// of the Deployment finishes the resize (recoverResize).
const ResizePausedAnnotation = "setpoint.dev/paused-for-resize"

// resizeGrace, in provider timeouts, is how long a resize may keep its
// Deployment paused before the pause is taken for one its process did not
// live to lift: a resize is a few calls, each bounded by the timeout.
const resizeGrace = 4

// interruptedResize says why a Deployment's apply must be finished: paused
// by an in-place resize that never resumed it ("" when it is not, or the
// resize may still be running). A time that does not read, or lies further
// ahead than the grace (a clock far off, a hand edit), counts as past it.
func interruptedResize(u *unstructured.Unstructured, now time.Time, grace time.Duration) string {
	v, ok := u.GetAnnotations()[ResizePausedAnnotation]
	if !ok {
		return ""
	}
	when := "at a time that does not read"
	if at, err := time.Parse(time.RFC3339, v); err == nil {
		if d := now.Sub(at); d < grace && d > -grace {
			return ""
		}
		when = "at " + at.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("paused by an in-place resize (%s) that never resumed it, so no template change rolls out; applying it again resumes it", when)
}

// annotationsOf is an object's annotations (none for no object).
func annotationsOf(u *unstructured.Unstructured) map[string]string {
	if u == nil {
		return nil
	}
	return u.GetAnnotations()
}

// maxQuoted bounds a value read from the cluster that a message quotes.
const maxQuoted = 64

// resizeHold is a Deployment held still while its template follows an
// in-place resize (see holdRollout).
type resizeHold struct {
	core     k8s.Interface
	ns, name string
	manager  string
	// paused: setpoint paused it (the user had not), so it resumes it.
	paused bool
}

// holdRollout makes the Deployment's template change that follows an
// in-place resize leave its pods alone. A Deployment rolls out whenever its
// template differs from its newest ReplicaSet's (compared without the
// pod-template-hash label); so the Deployment is paused, its current
// ReplicaSet's template given the same new memory, and finish unpauses it
// once the two templates agree again: the controller then finds that
// ReplicaSet matching and rolls nothing. A Deployment the user paused
// stays paused. The pause carries its time: a process killed before finish
// leaves a pause the next plan repairs (interruptedResize, recoverResize).
func holdRollout(call func() context.Context, core k8s.Interface, now time.Time, c providers.ObjectChange, live *unstructured.Unstructured) (*resizeHold, error) {
	want := memoryOf(c)
	h := &resizeHold{core: core, ns: c.Address.Namespace, name: c.Address.Name, manager: c.Manager}
	paused, _, _ := unstructured.NestedBool(live.Object, "spec", "paused")
	if !paused {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"paused":true}}`, ResizePausedAnnotation, now.UTC().Format(time.RFC3339))
		if _, err := core.AppsV1().Deployments(h.ns).Patch(call(), h.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: c.Manager}); err != nil {
			return nil, fmt.Errorf("pausing: %w", err)
		}
		h.paused = true
	}
	rs, err := currentReplicaSet(call, core, h.ns, live)
	if err != nil {
		return nil, errors.Join(err, h.finish(call))
	}
	if rs == nil {
		return h, nil
	}
	err = setReplicaSetMemory(call, core, h.ns, rs.Name, h.manager, func(name string) ([2]*resource.Quantity, bool) {
		w, ok := want[name]
		if !ok {
			return [2]*resource.Quantity{}, false
		}
		var q [2]*resource.Quantity
		for i, n := range w {
			if n != 0 {
				q[i] = resource.NewQuantity(n, resource.BinarySI)
			}
		}
		return q, true
	}, false)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("replicaset %s: %w", rs.Name, err), h.finish(call))
	}
	return h, nil
}

// finish ends the hold whatever became of the Deployment's apply: the
// current ReplicaSet's template memory is set to the Deployment's as read
// now (the new memory when the apply happened, the old when it did not or
// was cut off), then the Deployment is resumed. Resumed with the two apart,
// the controller would roll every pod out; so when they cannot be made to
// agree it stays paused, for the next plan to repair. The resized pods keep
// their memory either way; a change that failed is planned again.
func (h *resizeHold) finish(call func() context.Context) error {
	if err := alignReplicaSet(call, h.core, h.ns, h.name, h.manager); err != nil {
		return fmt.Errorf("left paused (the next plan repairs it): %w", err)
	}
	if !h.paused {
		return nil
	}
	if err := resumeRollout(call(), h.core, h.ns, h.name, h.manager); err != nil {
		return fmt.Errorf("resuming: %w", err)
	}
	return nil
}

// recoverResize finishes a resize whose process died midway, at any point:
// the current ReplicaSet's template memory set to the Deployment's, then
// the Deployment resumed.
func recoverResize(call func() context.Context, core k8s.Interface, ns, name, manager string) error {
	if err := alignReplicaSet(call, core, ns, name, manager); err != nil {
		return err
	}
	return resumeRollout(call(), core, ns, name, manager)
}

// alignReplicaSet gives the Deployment's current ReplicaSet the memory of
// the Deployment's own template, both read afresh.
func alignReplicaSet(call func() context.Context, core k8s.Interface, ns, name, manager string) error {
	d, err := core.AppsV1().Deployments(ns).Get(call(), name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading it again: %w", err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return err
	}
	rs, err := currentReplicaSet(call, core, ns, &unstructured.Unstructured{Object: u})
	if err != nil || rs == nil {
		return err
	}
	memory := map[string][2]*resource.Quantity{}
	for _, ct := range d.Spec.Template.Spec.Containers {
		var q [2]*resource.Quantity
		for i, list := range []corev1.ResourceList{ct.Resources.Requests, ct.Resources.Limits} {
			if v, ok := list[corev1.ResourceMemory]; ok {
				q[i] = &v
			}
		}
		memory[ct.Name] = q
	}
	err = setReplicaSetMemory(call, core, ns, rs.Name, manager, func(name string) ([2]*resource.Quantity, bool) {
		q, ok := memory[name]
		return q, ok
	}, true)
	if err != nil {
		return fmt.Errorf("replicaset %s: %w", rs.Name, err)
	}
	return nil
}

// setReplicaSetMemory sets the memory of a ReplicaSet's template
// containers to what to says (by container name), read afresh and written
// again on a conflict (the ReplicaSet controller writes its status often).
// A nil quantity is left as it is, or, exact, removed. Nothing is written
// when nothing moves.
func setReplicaSetMemory(call func() context.Context, core k8s.Interface, ns, rsName, manager string, to func(string) ([2]*resource.Quantity, bool), exact bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// Listed by name, not got: RBAC gives setpoint list (and update)
		// on ReplicaSets, nothing more.
		l, err := core.AppsV1().ReplicaSets(ns).List(call(), metav1.ListOptions{FieldSelector: "metadata.name=" + rsName})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("replicaset %s is gone", rsName)
		}
		rs := &l.Items[0]
		moved := false
		for i := range rs.Spec.Template.Spec.Containers {
			ct := &rs.Spec.Template.Spec.Containers[i]
			q, ok := to(ct.Name)
			if !ok {
				continue
			}
			for j, list := range []*corev1.ResourceList{&ct.Resources.Requests, &ct.Resources.Limits} {
				cur, has := (*list)[corev1.ResourceMemory]
				switch {
				case q[j] != nil && (!has || cur.Cmp(*q[j]) != 0):
					if *list == nil {
						*list = corev1.ResourceList{}
					}
					(*list)[corev1.ResourceMemory] = *q[j]
					moved = true
				case q[j] == nil && exact && has:
					delete(*list, corev1.ResourceMemory)
					moved = true
				}
			}
		}
		if !moved {
			return nil
		}
		_, err = core.AppsV1().ReplicaSets(ns).Update(call(), rs, metav1.UpdateOptions{FieldManager: manager})
		return err
	})
}

// resumeRollout unpauses a Deployment an in-place resize paused.
func resumeRollout(ctx context.Context, core k8s.Interface, ns, name, manager string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"paused":false}}`, ResizePausedAnnotation)
	_, err := core.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: manager})
	return err
}

// currentReplicaSet is the Deployment's ReplicaSet of the highest revision
// (nil when it has none).
func currentReplicaSet(call func() context.Context, core k8s.Interface, ns string, live *unstructured.Unstructured) (*appsv1.ReplicaSet, error) {
	sel, _, _ := unstructured.NestedStringMap(live.Object, "spec", "selector", "matchLabels")
	rss, err := core.AppsV1().ReplicaSets(ns).List(call(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return nil, fmt.Errorf("list replicasets.apps in namespace %s: %w", ns, err)
	}
	var cur *appsv1.ReplicaSet
	best := -1
	for i := range rss.Items {
		rs := &rss.Items[i]
		if ref := metav1.GetControllerOf(rs); ref == nil || ref.UID != live.GetUID() {
			continue
		}
		rev, err := strconv.Atoi(rs.Annotations["deployment.kubernetes.io/revision"])
		if err == nil && rev > best {
			cur, best = rs, rev
		}
	}
	return cur, nil
}

// maxPodErrors bounds how many pods' errors one change reports.
const maxPodErrors = 5

// resized is pod with the wanted memory, or why it may not have it.
func resized(pod *corev1.Pod, want map[string][2]int64) (*corev1.Pod, bool, error) {
	next := pod.DeepCopy()
	computed := QoSClass(pod)
	changed := false
	for i := range next.Spec.Containers {
		ct := &next.Spec.Containers[i]
		w, ok := want[ct.Name]
		if !ok {
			continue
		}
		// The pod gets what the template gets, nothing else: a Guaranteed
		// pod stays so when the decision keeps its request = limit (it
		// does, unless a limit is pinned), and is refused otherwise.
		req, lim := w[0], w[1]
		if ct.Resources.Requests == nil {
			ct.Resources.Requests = corev1.ResourceList{}
		}
		if ct.Resources.Limits == nil {
			ct.Resources.Limits = corev1.ResourceList{}
		}
		for _, s := range []struct {
			list corev1.ResourceList
			n    int64
		}{{ct.Resources.Requests, req}, {ct.Resources.Limits, lim}} {
			if s.n == 0 {
				continue
			}
			if cur, ok := s.list[corev1.ResourceMemory]; ok && cur.Value() == s.n {
				continue
			}
			s.list[corev1.ResourceMemory] = *resource.NewQuantity(s.n, resource.BinarySI)
			changed = true
		}
		if r, l := ct.Resources.Requests[corev1.ResourceMemory], ct.Resources.Limits[corev1.ResourceMemory]; !l.IsZero() && r.Cmp(l) > 0 {
			return nil, false, fmt.Errorf("container %s: request %s above limit %s", ct.Name, r.String(), l.String())
		}
	}
	if after := QoSClass(next); after != computed {
		return nil, false, fmt.Errorf("the new memory would change its QoS class from %s to %s", computed, after)
	}
	return next, changed, nil
}

// QoSClass is a pod's quality-of-service class as the kubelet computes it
// from its containers' CPU and memory requests and limits.
func QoSClass(pod *corev1.Pod) corev1.PodQOSClass {
	any, guaranteed := false, true
	for _, ct := range pod.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := ct.Resources.Requests[r]
			lim, hasLim := ct.Resources.Limits[r]
			if (hasReq && !req.IsZero()) || (hasLim && !lim.IsZero()) {
				any = true
			}
			if !hasLim || lim.IsZero() {
				guaranteed = false
				continue
			}
			if hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func podReady(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
