package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// pending is an object change checked against the world and found
// acceptable: committing it cannot fail.
type pending struct {
	release []addrs.Path // fields the change's manager gives up
	restore []addrs.Path // fields written with the user's value and given up, in path order
	c       providers.ObjectChange
	o       *object   // the object changed; nil when it is created, or deleted and absent
	wl      *workload // the workload whose HPA is created
	route   *routeChange
	policy  *policyChange
	// set is what is written, in path order: every changed path, and the
	// other attributes of the change setpoint already owns (another
	// manager's unchanged fields are left alone).
	set   []addrs.Path
	after map[addrs.Path]values.Value
}

// check validates one object change against the world as it is, changing
// nothing: every attribute first, then conflicts, then the object's final
// state. It returns the change ready to commit, or a result saying why
// the world refuses it.
func (w *World) check(c providers.ObjectChange) (*pending, providers.ObjectResult) {
	res := providers.ObjectResult{Address: c.Address}
	fail := func(format string, a ...any) (*pending, providers.ObjectResult) {
		res.Err = fmt.Sprintf(format, a...)
		return nil, res
	}
	o := w.byKey[c.Address.Key()]
	p := &pending{c: c, o: o}
	if len(c.Restored) > 0 {
		if err := c.CheckRestored(); err != nil {
			return fail("%v", err)
		}
		switch {
		case c.Address.Kind != KindDeployment && c.Address.Kind != KindHPA && c.Address.Kind != KindKnative && c.Address.Kind != KindCluster:
			return fail("a %s has no user's value to restore", c.Address.Kind)
		case o == nil:
			return fail("a restore is an update of an object that exists")
		}
	}
	switch c.Address.Kind {
	case KindCluster:
		return w.checkCluster(p, res)
	case KindRouteGroup:
		return w.checkRoute(p, res)
	case KindNodePolicy:
		return w.checkPolicy(p, res)
	}
	switch c.Action {
	case action.Delete:
		return w.checkDelete(p, res)
	case action.Create:
		// Create of an object that exists applies to it, as server-side
		// apply does.
		if o == nil {
			wl, err := w.creatable(c.Address)
			if err != nil {
				return fail("%v", err)
			}
			p.wl = wl
		}
	case action.Update, action.NoOp:
		if o == nil {
			return fail("no such object")
		}
	default:
		return fail("unknown action %s", c.Action)
	}
	kind, wl := c.Address.Kind, p.wl
	if o != nil {
		kind, wl = o.kind, o.wl
	}

	paths := slices.SortedFunc(maps.Keys(c.Attributes), comparePaths)
	for _, path := range paths {
		if err := wl.checkValue(kind, path, c.Attributes[path]); err != nil {
			return fail("%v", err)
		}
	}
	changed := make(map[addrs.Path]bool, len(c.Changed))
	for _, path := range c.Changed {
		if _, ok := c.Attributes[path]; !ok {
			return fail("%s: marked changed but the change has no value for it", path)
		}
		changed[path] = true
	}

	p.restore = slices.SortedFunc(maps.Keys(c.Restored), comparePaths)
	for _, path := range p.restore {
		if err := wl.checkValue(kind, path, c.Restored[path]); err != nil {
			return fail("%v", err)
		}
	}

	// Server-side apply: a changed field another manager owns is a
	// conflict unless the change forces it; so is a restored one (its
	// owner now is not the user setpoint recorded).
	if o != nil && !c.Force {
		for _, path := range slices.SortedFunc(slices.Values(slices.Concat(c.Changed, p.restore)), comparePaths) {
			if m := o.manager(path); m != c.Manager && m != "" {
				res.Conflicts = append(res.Conflicts, providers.Conflict{Path: path, Manager: m})
			}
		}
		if len(res.Conflicts) > 0 {
			msgs := make([]string, len(res.Conflicts))
			for i, cf := range res.Conflicts {
				msgs[i] = fmt.Sprintf("%s is owned by %s", cf.Path, cf.Manager)
			}
			return fail("conflict: %s (apply with force to take it)", strings.Join(msgs, "; "))
		}
	}

	for _, path := range paths {
		if o == nil || changed[path] || o.manager(path) == c.Manager {
			p.set = append(p.set, path)
		}
	}
	// A released field keeps its value; the manager gives it up, as a
	// server-side apply that no longer names it would (without the
	// removal SSA makes of a field nobody else manages: the value stays).
	for _, path := range c.Released {
		if _, set := c.Attributes[path]; set {
			return fail("%s is both set and released", path)
		}
		if o != nil && o.manager(path) == c.Manager {
			p.release = append(p.release, path)
		}
	}
	if err := p.checkFinal(kind, wl); err != nil {
		return fail("%v", err)
	}
	p.after = make(map[addrs.Path]values.Value, len(paths)+len(p.restore))
	for _, path := range paths {
		if v, ok := p.final(path); ok {
			p.after[path] = v
		}
	}
	for _, path := range p.restore {
		p.after[path] = c.Restored[path]
	}
	res.After = p.after
	return p, res
}

// sets reports whether the change writes path.
func (p *pending) sets(path addrs.Path) bool {
	_, ok := slices.BinarySearchFunc(p.set, path, comparePaths)
	return ok
}

// final is an attribute's value once the change is committed.
func (p *pending) final(path addrs.Path) (values.Value, bool) {
	if p.sets(path) {
		return p.c.Attributes[path], true
	}
	if v, ok := p.c.Restored[path]; ok {
		return v, true
	}
	if p.o == nil {
		return values.Value{}, false
	}
	v, ok := p.o.attrs[path]
	return v, ok
}

// checkFinal checks the object as the change would leave it, so values
// that move together (a request and its limit) are judged together.
func (p *pending) checkFinal(kind string, wl *workload) error {
	switch kind {
	case KindHPA:
		minR, okMin := p.final(AttrMinReplicas)
		maxR, okMax := p.final(AttrMaxReplicas)
		if !okMin || !okMax {
			return fmt.Errorf("an HPA needs %s and %s", AttrMinReplicas, AttrMaxReplicas)
		}
		if maxR.Int() < minR.Int() {
			return fmt.Errorf("%s: %s is below %s %s", AttrMaxReplicas, maxR, AttrMinReplicas, minR)
		}
	case KindKnative:
		if !p.sets(AttrMinScale) && !p.sets(AttrMaxScale) {
			break
		}
		minS, _ := p.final(AttrMinScale)
		if maxS, ok := p.final(AttrMaxScale); ok && maxS.Int() > 0 && maxS.Int() < minS.Int() {
			return fmt.Errorf("%s: %s is below %s %s", AttrMaxScale, maxS, AttrMinScale, minS)
		}
	}
	checked := map[int]bool{}
	for _, path := range slices.Concat(p.set, p.restore) {
		i, ok := wl.containerOf[path]
		if !ok || checked[i] {
			continue
		}
		checked[i] = true
		m := wl.mem[i]
		req, _ := p.final(m.req)
		lim, _ := p.final(m.lim)
		if req.Int() > lim.Int() {
			return fmt.Errorf("%s: memory request %s would exceed the limit %s", m.name, req, lim)
		}
	}
	return nil
}

// checkDelete allows deleting only an HPA the same manager created: the
// sim world does not delete workloads, nor what its config made.
func (w *World) checkDelete(p *pending, res providers.ObjectResult) (*pending, providers.ObjectResult) {
	c, o := p.c, p.o
	switch {
	case c.Address.Kind != KindHPA:
		res.Err = fmt.Sprintf("the sim world does not delete a %s: it deletes only HorizontalPodAutoscalers created through apply", c.Address.Kind)
	case o == nil:
		// Already gone: deleting is idempotent.
		return p, res
	case o.createdBy == "":
		res.Err = "this HorizontalPodAutoscaler comes from the sim config: the sim world deletes only those created through apply"
	case o.createdBy != c.Manager:
		res.Err = fmt.Sprintf("this HorizontalPodAutoscaler was created by %s, not %s", o.createdBy, c.Manager)
	default:
		return p, res
	}
	return nil, res
}

// creatable finds the workload an object would be created for: the sim
// world creates only an HPA for a Deployment that has none.
func (w *World) creatable(a providers.Address) (*workload, error) {
	if a.Kind != KindHPA {
		return nil, fmt.Errorf("the sim world creates only HorizontalPodAutoscalers, not %s", a.Kind)
	}
	for _, wl := range w.wls {
		if wl.cfg.Namespace == a.Namespace && wl.cfg.Name == a.Name && wl.deploy != nil {
			return wl, nil
		}
	}
	return nil, fmt.Errorf("no Deployment %s/%s to autoscale", a.Namespace, a.Name)
}

// commit makes a checked change take effect and reports whether anything
// moved (a value, a manager, an object created or deleted).
func (w *World) commit(p *pending) bool {
	c := p.c
	switch c.Address.Kind {
	case KindCluster:
		return w.commitCluster(p)
	case KindRouteGroup:
		return w.commitRoute(p)
	case KindNodePolicy:
		return w.commitPolicy(p)
	}
	if c.Action == action.Delete {
		if p.o == nil {
			return false
		}
		w.dropObject(p.o.key())
		wl := p.o.wl
		wl.hpa, wl.hpaRecs = nil, nil
		// The Deployment keeps its replicas, and the HPA's entry in its
		// managed fields, as Kubernetes leaves them.
		return true
	}
	o, moved := p.o, false
	if o == nil {
		o, moved = p.wl.createHPA(c), true
	}
	for _, path := range p.release {
		o.managers[path] = "" // nobody's: the next writer takes it without force
		moved = true
	}
	gen, tmpl := false, false
	for _, path := range p.restore {
		// The user's value, and nobody's field, as a release leaves it.
		o.managers[path] = ""
		moved = true
		if old, ok := o.attrs[path]; ok && old == c.Restored[path] {
			continue
		}
		o.attrs[path] = c.Restored[path]
		gen = true
		if path.HasPrefix(pathTemplateSpec) {
			tmpl = true
		}
	}
	for _, path := range p.set {
		if o.manager(path) != c.Manager {
			o.managers[path] = c.Manager
			moved = true
		}
		if old, ok := o.attrs[path]; ok && old == c.Attributes[path] {
			continue
		}
		o.attrs[path] = c.Attributes[path]
		moved, gen = true, true
		if path.HasPrefix(pathTemplateSpec) {
			tmpl = true
		}
	}
	if gen && p.o != nil {
		o.generation++
	}
	if tmpl {
		o.templateGen++
	}
	return moved
}

// createHPA makes the HPA the engine asked for (with a CPU target of 80%
// of requests, as kubectl autoscale, unless the config names one). Its
// attributes are set by the commit.
func (wl *workload) createHPA(c providers.ObjectChange) *object {
	if wl.cfg.HPA == nil {
		minR, maxR := c.Attributes[AttrMinReplicas], c.Attributes[AttrMaxReplicas]
		wl.cfg.HPA = &spec.SimHPA{Min: int(minR.Int()), Max: int(maxR.Int())}
		if t, ok := c.Attributes[AttrTargetCPU]; ok && t.Int() > 0 {
			pct := spec.Percent(float64(t.Int()) / 100)
			wl.cfg.HPA.TargetCPU = &pct
		}
	}
	manager := c.Manager
	wl.hpa = wl.newObject(KindHPA, func(addrs.Path) string { return manager })
	wl.hpa.createdBy = manager
	wl.hpa.attrs[AttrScaleDownWindow] = values.CountOf(defaultScaleDownWindow)
	wl.deploy.managers[AttrReplicas] = HPAManager
	// The HPA's first sync sees only what arrived since it was created.
	wl.syncServed, wl.syncArrived, wl.syncSecs, wl.hpaRecs = 0, 0, 0, nil
	return wl.hpa
}

func comparePaths(a, b addrs.Path) int { return strings.Compare(a.String(), b.String()) }
