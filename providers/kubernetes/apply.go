package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// applyWorkers is how many objects' changes are sent at once.
const applyWorkers = 8

// PlanChange sends each change as a server-side apply with dryRun=All:
// admission, validation and ownership conflicts show in the plan, nothing
// is stored.
func (p *Provider) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	return providers.PlanChangeResponse{Results: p.changes(ctx, req.Now, req.Changes, true)}
}

// Apply applies each change as one server-side apply of every field
// setpoint owns on the object; each succeeds or fails whole.
func (p *Provider) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	return providers.ApplyResponse{Results: p.changes(ctx, req.Now, req.Changes, false)}
}

func (p *Provider) changes(ctx context.Context, now time.Time, cs []providers.ObjectChange, dryRun bool) []providers.ObjectResult {
	out := make([]providers.ObjectResult, len(cs))
	dyn, core, err := p.clients()
	if err != nil {
		for i, c := range cs {
			out[i] = providers.ObjectResult{Address: c.Address, Err: err.Error()}
		}
		return out
	}
	// Objects are independent (each change is one object's, whole), so a
	// few go at once; the client's rate limiter still bounds the total.
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(applyWorkers, len(cs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if cs[i].Address.Kind == cluster.Kind {
					out[i] = p.capiChange(ctx, dyn, cs[i], dryRun)
					continue
				}
				out[i] = p.change(ctx, dyn, core, now, cs[i], dryRun)
			}
		}()
	}
	for i := range cs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// validate checks a change against the kind's attributes before anything
// is sent.
func validate(k *kind, c providers.ObjectChange) error {
	if err := checkAction(c); err != nil {
		return err
	}
	for path, v := range c.Attributes {
		if err := writable(k, path, v); err != nil {
			return err
		}
	}
	for _, path := range c.Released {
		if _, ok := k.attrOf(path); !ok {
			return fmt.Errorf("%s: %s has no such attribute", path, k.name)
		}
		if _, set := c.Attributes[path]; set {
			return fmt.Errorf("%s is both set and released", path)
		}
	}
	if err := c.CheckRestored(); err != nil {
		return err
	}
	for _, path := range restoredPaths(c) {
		if err := writable(k, path, c.Restored[path]); err != nil {
			return err
		}
	}
	return nil
}

// writable checks a value setpoint writes (set or restored) against the
// kind's attribute.
func writable(k *kind, path addrs.Path, v values.Value) error {
	at, ok := k.attrOf(path)
	switch {
	case !ok:
		return fmt.Errorf("%s: %s has no such attribute", path, k.name)
	case at.readOnly && k.name == KindKnative && !path.HasPrefix(workload.Status):
		return fmt.Errorf("%s: not written on a KnativeService: its CRD makes the container list atomic, so an apply would own (and could drop) every container", path)
	case at.readOnly:
		return fmt.Errorf("%s: read only", path)
	case v.Type() != at.typ:
		return fmt.Errorf("%s: want a %s, got the %s %s", path, at.typ, v.Type(), v)
	case v.Int() < 0:
		return fmt.Errorf("%s: %s is negative", path, v)
	case at.upTo > 0 && v.Int() > at.upTo:
		return fmt.Errorf("%s: %s is above %d, the most the API server accepts", path, v, at.upTo)
	}
	return nil
}

func (p *Provider) change(ctx context.Context, dyn dynamic.Interface, core k8s.Interface, now time.Time, c providers.ObjectChange, dryRun bool) (res providers.ObjectResult) {
	res = providers.ObjectResult{Address: c.Address}
	fail := func(err error) providers.ObjectResult {
		res.Err = err.Error()
		return res
	}
	k, err := kindOf(c.Address.Kind)
	if err != nil {
		return fail(err)
	}
	if err := validate(k, c); err != nil {
		return fail(err)
	}
	rc := dyn.Resource(k.gvr).Namespace(c.Address.Namespace)
	// Each request has its own deadline: a change of many pods is many
	// requests.
	var cancels []context.CancelFunc
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	call := func() context.Context {
		cctx, cancel := context.WithTimeout(ctx, p.timeout)
		cancels = append(cancels, cancel)
		return cctx
	}
	live, err := rc.Get(call(), c.Address.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
		if c.Action != action.Create {
			return fail(fmt.Errorf("%s does not exist: setpoint creates only what a spec asks for", c.Address))
		}
		if k.name != KindHPA && k.name != KindNodeAgent {
			return fail(fmt.Errorf("%s: the kubernetes provider creates only HorizontalPodAutoscalers and NodeAgentConfigs", c.Address))
		}
		if k.name == KindHPA {
			// The HPA it would create scales the Deployment of its name:
			// one of another name may already scale it, and two HPAs on
			// one workload fight over its replicas.
			if other, err := scaledBy(call(), rc, "Deployment", c.Address.Name); err != nil {
				return fail(explain(err, "list", k, c.Address.Namespace))
			} else if other != "" {
				return fail(fmt.Errorf("%s: Deployment %s/%s is already scaled by HorizontalPodAutoscaler %s: setpoint does not create a second", c.Address, c.Address.Namespace, c.Address.Name, other))
			}
		}
	case err != nil:
		return fail(explain(err, "get", k, c.Address.Namespace))
	}

	// The steps that finish a resize go on when the apply's context is
	// cancelled (a SIGTERM): stopping between them is what leaves a
	// Deployment paused with its templates apart.
	finishing := func() context.Context {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.timeout)
		cancels = append(cancels, cancel)
		return cctx
	}
	if _, paused := annotationsOf(live)[ResizePausedAnnotation]; paused && k.name == KindDeployment {
		if interruptedResize(live, now, resizeGrace*p.timeout) == "" {
			// Another process's resize, still running (the state's lock
			// does not span two backends): nothing is changed meanwhile.
			return fail(fmt.Errorf("%s: an in-place resize of it is in progress (paused for it at %q): not changed meanwhile", c.Address, diag.Cut(live.GetAnnotations()[ResizePausedAnnotation], maxQuoted)))
		}
		if !dryRun {
			// A resize paused this Deployment and did not live to finish:
			// its ReplicaSet made to agree with it, then resumed.
			if err := recoverResize(finishing, core, c.Address.Namespace, c.Address.Name, c.Manager); err != nil {
				return fail(fmt.Errorf("%s: finishing an interrupted in-place resize: %w", c.Address, err))
			}
			if live, err = rc.Get(call(), c.Address.Name, metav1.GetOptions{}); err != nil {
				return fail(explain(err, "get", k, c.Address.Namespace))
			}
		}
	}
	if len(c.Restored) > 0 && live != nil && !c.Force {
		// A restore writes a value: a field another manager took since the
		// plan read it (a GitOps controller) is theirs, a conflict as for
		// any change, not overwritten by the hand-back's force. Checked
		// before anything is written, pods resized in place included.
		ms := managedSets(live.GetManagedFields())
		for _, path := range restoredPaths(c) {
			at, _ := k.attrOf(path)
			fp, err := fieldPath(at.place())
			if err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
			if m := managerOf(ms, fp, c.Manager); m != "" && m != c.Manager && m != HandbackManager {
				res.Conflicts = append(res.Conflicts, providers.Conflict{Path: path, Manager: m})
			}
		}
		if len(res.Conflicts) > 0 {
			res.Err = conflictText(res.Conflicts)
			return res
		}
	}
	obj, err := applyConfig(k, c, live)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", c.Address, err))
	}
	opts := metav1.ApplyOptions{FieldManager: c.Manager, Force: c.Force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if c.InPlace != "" && live != nil && !dryRun {
		// Pods are resized only for a change the API server would take:
		// a conflict or a validation error must not leave pods changed.
		probe := opts
		probe.DryRun = []string{metav1.DryRunAll}
		if _, err := rc.Apply(call(), c.Address.Name, &unstructured.Unstructured{Object: obj}, probe); err != nil {
			return p.refused(ctx, core, now, k, c, live, err, true)
		}
		if err := p.resizePods(call, core, c, live); err != nil {
			if c.InPlace != providers.InPlaceFallbackRollout {
				return fail(fmt.Errorf("%s: in-place resize refused, template left as it is (memory.inPlaceFallback: hold): %w", c.Address, err))
			}
			logger.Warn("in-place resize refused; rolling out the template instead (memory.inPlaceFallback: rollout)", "object", c.Address.String(), "err", err)
		} else if k.name == KindDeployment {
			// The pods have their new memory: the template follows without
			// a rollout (see holdRollout).
			hold, err := holdRollout(call, core, now, c, live)
			if err != nil {
				return fail(fmt.Errorf("%s: pods resized, but the template could not follow without a rollout: %w", c.Address, err))
			}
			defer func() {
				if err := hold.finish(finishing); err != nil {
					logger.Error("ending the hold on a Deployment paused for an in-place resize", "object", c.Address.String(), "err", err)
					if res.Err == "" {
						res.Err = fmt.Sprintf("%s: applied, but ending the in-place resize's hold: %v", c.Address, err)
					}
				}
			}()
		}
	}
	if (len(c.Released) > 0 || len(c.Restored) > 0) && live != nil {
		if err := handBack(call(), rc, k, c, live, dryRun); err != nil {
			return fail(fmt.Errorf("handing back %s: %w", c.Address, err))
		}
	}
	after, err := rc.Apply(call(), c.Address.Name, &unstructured.Unstructured{Object: obj}, opts)
	if err != nil {
		return p.refused(ctx, core, now, k, c, live, err, dryRun)
	}
	res.After = map[addrs.Path]values.Value{}
	for path := range c.Attributes {
		at, _ := k.attrOf(path)
		if v, ok, _ := at.decode(after.Object); ok {
			res.After[path] = v
		}
	}
	if !dryRun {
		p.event(ctx, core, now, k, c.Address, after, corev1.EventTypeNormal, "SetpointApplied", summary(c, live, k)+reasonSuffix(c))
	}
	return res
}

// refused is the result of an apply the API server refused: a conflict
// naming the managers (and an Event when it was meant for real), or the
// error.
func (p *Provider) refused(ctx context.Context, core k8s.Interface, now time.Time, k *kind, c providers.ObjectChange, live *unstructured.Unstructured, err error, dryRun bool) providers.ObjectResult {
	res := providers.ObjectResult{Address: c.Address}
	if conflicts := conflictsOf(err, k, c); len(conflicts) > 0 {
		res.Conflicts = conflicts
		res.Err = conflictText(conflicts)
		if !dryRun || c.InPlace != "" {
			p.event(ctx, core, now, k, c.Address, live, corev1.EventTypeWarning, "SetpointConflict",
				res.Err+"; not applied: the spec does not allow taking the field (takeOverFrom)"+reasonSuffix(c))
		}
		return res
	}
	res.Err = explain(err, verbOf(dryRun), k, c.Address.Namespace).Error()
	return res
}

func verbOf(dryRun bool) string {
	if dryRun {
		return "dry-run apply (patch)"
	}
	return "apply (patch)"
}

// applyConfig builds the one applied configuration of the change: every
// field the manager applied before (read back from managedFields, so
// nothing it owned is dropped even if the engine's state lost it), the
// change's attributes over them, less the released fields.
func applyConfig(k *kind, c providers.ObjectChange, live *unstructured.Unstructured) (map[string]any, error) {
	obj := map[string]any{}
	owned := &fieldpath.Set{}
	if live != nil {
		owned = ownedBy(managedSets(live.GetManagedFields()), c.Manager)
		if err := extract(obj, live.Object, owned); err != nil {
			return nil, err
		}
	}
	obj["apiVersion"] = k.apiVersion
	obj["kind"] = k.apiKind
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["name"] = c.Address.Name
	meta["namespace"] = c.Address.Namespace
	if live != nil {
		// A precondition: if the object was deleted (and maybe made again)
		// since it was read, the apply fails instead of creating a
		// skeleton of it.
		meta["uid"] = string(live.GetUID())
	}
	obj["metadata"] = meta
	if live == nil && k.name == KindHPA {
		// An HPA setpoint creates scales the Deployment of its name.
		if err := set(obj, addrs.MustPath("spec.scaleTargetRef"), map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment", "name": c.Address.Name}); err != nil {
			return nil, err
		}
	}
	paths := make([]addrs.Path, 0, len(c.Attributes))
	for path := range c.Attributes {
		paths = append(paths, path)
	}
	sort.Slice(paths, func(i, j int) bool { return paths[i].String() < paths[j].String() })
	for _, path := range paths {
		at, _ := k.attrOf(path)
		if live != nil && !slices.Contains(c.Changed, path) {
			// A field carried over from the state but no longer setpoint's
			// (someone took it since, with force) is not taken back: only
			// the fields this change moves may be, and only by its Force.
			if fp, err := fieldPath(at.place()); err == nil && !owned.Has(fp) {
				continue
			}
		}
		if name, ok := path.Selected("name"); ok && live != nil && !slices.Contains(containerNames(live.Object, k.containers), name) {
			return nil, fmt.Errorf("%s: no container %q", path, name)
		}
		var base map[string]any
		if live != nil {
			base = live.Object
		}
		if err := at.encode(obj, base, c.Attributes[path]); err != nil {
			return nil, err
		}
	}
	// Released and restored fields were setpoint's when live was read:
	// handed back first, they must not be applied again.
	for _, path := range slices.Concat(c.Released, restoredPaths(c)) {
		at, _ := k.attrOf(path)
		remove(obj, at.place())
	}
	return obj, nil
}

// restoredPaths lists a change's restored fields in a stable order.
func restoredPaths(c providers.ObjectChange) []addrs.Path {
	out := make([]addrs.Path, 0, len(c.Restored))
	for p := range c.Restored {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b addrs.Path) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// handBack gives the released fields, with the values they have, and the
// restored ones, with the user's values, to HandbackManager: the following
// apply no longer names them, and since setpoint then owns none of them
// the API server keeps their values. A process killed between the two
// requests leaves the restored value in place and handed back (a forced
// apply of another value takes the field from setpoint).

func handBack(ctx context.Context, rc dynamic.ResourceInterface, k *kind, c providers.ObjectChange, live *unstructured.Unstructured, dryRun bool) error {
	obj := map[string]any{}
	// What it was handed before stays in its applied configuration, or
	// this apply would take it away (and remove it if nobody else owns it).
	if err := extract(obj, live.Object, ownedBy(managedSets(live.GetManagedFields()), HandbackManager)); err != nil {
		return err
	}
	obj["apiVersion"], obj["kind"] = k.apiVersion, k.apiKind
	obj["metadata"] = map[string]any{"name": c.Address.Name, "namespace": c.Address.Namespace, "uid": string(live.GetUID())}
	n := 0
	for _, path := range c.Released {
		if removedOnRelease(k, path, live) {
			continue
		}
		at, _ := k.attrOf(path)
		place := at.place()
		if v, ok := get(live.Object, place); ok {
			if err := set(obj, place, v); err != nil {
				return err
			}
			n++
		}
	}
	for _, path := range restoredPaths(c) {
		at, _ := k.attrOf(path)
		if name, ok := path.Selected("name"); ok && !slices.Contains(containerNames(live.Object, k.containers), name) {
			return fmt.Errorf("%s: no container %q", path, name)
		}
		if err := at.encode(obj, live.Object, c.Restored[path]); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	force := true
	opts := metav1.ApplyOptions{FieldManager: HandbackManager, Force: force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := rc.Apply(ctx, c.Address.Name, &unstructured.Unstructured{Object: obj}, opts)
	return err
}

// removedOnRelease says a released field is not handed back but goes with
// setpoint's apply: a NodeAgentConfig's spec.config is what a spec setpoint
// applied asked of the node agents (an eBPF route group's VIP entry on
// every node, a NodePolicy's pools), not a user's value, so with it gone
// the agents stop routing the VIP or give the containers back their CPUs,
// as a local agent's release does. (Handed back, an NRI config kept every
// container pinned after its NodePolicy was deleted: the real node's test
// found it.)
func removedOnRelease(k *kind, path addrs.Path, live *unstructured.Unstructured) bool {
	if k.name != KindNodeAgent || path != AttrAgentConfig || live == nil {
		return false
	}
	agent, _, _ := unstructured.NestedString(live.Object, "spec", "agent")
	return agent == nodeagent.EBPF || agent == nodeagent.NRI
}

// conflictsOf reads a server-side apply conflict: one cause per field,
// naming the manager that holds it.
func conflictsOf(err error, k *kind, c providers.ObjectChange) []providers.Conflict {
	var st apierrors.APIStatus
	if !apierrors.IsConflict(err) || !errors.As(err, &st) || st.Status().Details == nil {
		return nil
	}
	byField := map[string]addrs.Path{}
	for path := range c.Attributes {
		at, _ := k.attrOf(path)
		if fp, err := fieldPath(at.place()); err == nil {
			byField[fp.String()] = path
		}
	}
	var out []providers.Conflict
	for _, cause := range st.Status().Details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		path, ok := byField[cause.Field]
		if !ok {
			// A field setpoint owned before and re-sends (read back from
			// managedFields): the server's path, as setpoint writes it.
			path = attrPathOf(cause.Field)
		}
		out = append(out, providers.Conflict{Path: path, Manager: quoted(cause.Message)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path.String() < out[j].Path.String()
		}
		return out[i].Manager < out[j].Manager
	})
	return out
}

// quoted is the first double-quoted word of s: the manager in `conflict
// with "kubectl-client-side-apply" using apps/v1`.
func quoted(s string) string {
	i := strings.IndexByte(s, '"')
	if i < 0 {
		return s
	}
	j := strings.IndexByte(s[i+1:], '"')
	if j < 0 {
		return s[i+1:]
	}
	return s[i+1 : i+1+j]
}

func conflictText(cs []providers.Conflict) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s is managed by %s", c.Path, c.Manager)
	}
	return "conflict: " + strings.Join(parts, "; ")
}

// summary says what an apply moved, with the numbers: "spec.replicas 3 → 5".
func summary(c providers.ObjectChange, live *unstructured.Unstructured, k *kind) string {
	var parts []string
	for _, path := range c.Changed {
		from := "unset"
		if live != nil {
			at, _ := k.attrOf(path)
			if v, ok, _ := at.decode(live.Object); ok {
				from = v.String()
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s → %s", path, from, c.Attributes[path]))
	}
	for _, path := range c.Released {
		if removedOnRelease(k, path, live) {
			parts = append(parts, fmt.Sprintf("%s released and removed (the eBPF agents stop routing it)", path))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s released (value kept)", path))
	}
	for path, v := range c.Restored {
		parts = append(parts, fmt.Sprintf("%s restored to %s and released", path, v))
	}
	sort.Strings(parts)
	verb := "applied"
	if live == nil {
		verb = "created"
	}
	return "setpoint " + verb + ": " + strings.Join(parts, ", ")
}

func reasonSuffix(c providers.ObjectChange) string {
	if c.Reason == "" {
		return ""
	}
	return " (" + c.Reason + ")"
}

// eventPrefix is an Event's generated name's prefix: the object's name,
// short enough for the server's suffix.
func eventPrefix(name string) string {
	if len(name) > 200 {
		name = name[:200]
	}
	return name + "."
}

// maxEventMessage is what the API server accepts in an Event's message.
const maxEventMessage = 1024

// event records what setpoint did to an object as a Kubernetes Event, as
// controllers do; a failure to record is logged, never fails the apply.
func (p *Provider) event(ctx context.Context, core k8s.Interface, now time.Time, k *kind, a providers.Address, obj *unstructured.Unstructured, typ, reason, msg string) {
	if !p.events {
		return
	}
	msg = diag.Cut(msg, maxEventMessage-len("…"))
	if now.IsZero() {
		now = time.Now()
	}
	ref := corev1.ObjectReference{Kind: k.apiKind, APIVersion: k.apiVersion, Namespace: a.Namespace, Name: a.Name}
	if obj != nil {
		ref.UID, ref.ResourceVersion = obj.GetUID(), obj.GetResourceVersion()
	}
	t := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: eventPrefix(a.Name), Namespace: a.Namespace},
		InvolvedObject: ref, Reason: reason, Message: msg, Type: typ,
		Source:         corev1.EventSource{Component: EventComponent},
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
		ReportingController: "setpoint.dev/setpoint", ReportingInstance: EventComponent,
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if _, err := core.CoreV1().Events(a.Namespace).Create(cctx, ev, metav1.CreateOptions{}); err != nil {
		logger.Warn("recording an event", "object", a.String(), "reason", reason, "err", err)
	}
}

// scaledBy is the name of an HPA of the namespace whose scaleTargetRef
// names the workload, "" when none does.
func scaledBy(ctx context.Context, rc dynamic.ResourceInterface, kind, name string) (string, error) {
	l, err := rc.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	for _, h := range l.Items {
		k, _, _ := unstructured.NestedString(h.Object, "spec", "scaleTargetRef", "kind")
		n, _, _ := unstructured.NestedString(h.Object, "spec", "scaleTargetRef", "name")
		if k == kind && n == name {
			return h.GetName(), nil
		}
	}
	return "", nil
}
