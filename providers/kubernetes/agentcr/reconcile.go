package agentcr

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Entry is one NodeAgentConfig an agent takes.
type Entry struct {
	Namespace, Name string
	Config
}

// MaxConfigs bounds the NodeAgentConfigs one agent takes: what a list may
// hand it is not up to the agent.
const MaxConfigs = 1024

// List returns the NodeAgentConfigs of agent in namespace ("" for all)
// whose node selector matches labels, by namespace and name.
func List(ctx context.Context, dyn dynamic.Interface, namespace, agent string, labels map[string]string) ([]Entry, error) {
	l, err := dyn.Resource(GVR).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: MaxConfigs + 1})
	if err != nil {
		return nil, fmt.Errorf("listing nodeagentconfigs: %w", err)
	}
	if len(l.Items) > MaxConfigs || l.GetContinue() != "" {
		return nil, fmt.Errorf("more than %d nodeagentconfigs: an agent takes at most %d", MaxConfigs, MaxConfigs)
	}
	var out []Entry
	for _, u := range l.Items {
		c, err := decode(&u)
		if err != nil {
			return nil, err
		}
		if c.Agent != agent || !selects(c.NodeSelector, labels) {
			continue
		}
		out = append(out, Entry{Namespace: u.GetNamespace(), Name: u.GetName(), Config: c})
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out, nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// NodeLabels reads a node's labels (what a config's nodeSelector matches).
func NodeLabels(ctx context.Context, dyn dynamic.Interface, node string) (map[string]string, error) {
	u, err := dyn.Resource(nodesGVR).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	return u.GetLabels(), nil
}

// Resumer is a provider whose objects can outlive its process: the eBPF
// agent's pinned dataplane keeps routing a crashed agent's VIPs. Resumed
// lists the objects it took over from the process before; a Reconciler's
// first pass counts them as applied, so those no config asks for any more
// (deleted, or no longer for this node, while no agent ran) are released
// as a config deleted under a running agent is.
type Resumer interface {
	Resumed(ctx context.Context) ([]addrs.Object, error)
}

// Reconciler runs a node agent's provider from the NodeAgentConfigs that
// select its node, as controller-runtime's reconcilers run a controller:
// each pass lists what is asked, applies the difference (a config gone,
// or without spec.config, is released), and reports in each config's
// status, this node's entry only.
type Reconciler struct {
	Dyn dynamic.Interface
	// Namespace to watch ("" for all); Node is this agent's node.
	Namespace, Node string
	// Agent is which configs are this agent's (nodeagent.EBPF, NRI).
	Agent    string
	Provider providers.Provider
	// Object is the provider's object a config at namespace/name sets,
	// and Attr the attribute its spec.config goes to.
	Object func(namespace, name string) addrs.Object
	Attr   addrs.Path
	// Observed is what a report carries of the provider's object.
	Observed func(providers.Object) any
	// Key is the part of the provider's object whose change is reported
	// before the next Refresh (nil: none): a group's backends or regime,
	// not its tick counter; KeyEvery (default 10 s) the least time between
	// two reports a key change makes, so a flapping key costs the API
	// server a write per KeyEvery, not per pass.
	Key      func(providers.Object) string
	KeyEvery time.Duration
	// Refresh is how often a report is rewritten when nothing changed (a
	// status every pass from every node would load the API server).
	Refresh time.Duration
	Now     func() time.Time
	Log     *slog.Logger

	applied  map[addrs.Object]appliedConfig
	reported map[addrs.Object]report
	// settled: what the provider resumed is in applied.
	settled bool
}

// appliedConfig is what the provider was last given for an object; a
// config the provider resumed from the process before has none ("").
type appliedConfig struct {
	config     string
	generation int64
	err        string
}

// noConfig is the report on a config without spec.config: setpoint
// released it (a RouteGroup's goes when its spec is deleted), or nobody
// wrote one.
const noConfig = "no spec.config: nothing of it runs on this node"

type report struct {
	generation int64
	message    string
	key        string
	at         time.Time
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Sync runs one pass.
func (r *Reconciler) Sync(ctx context.Context) error {
	if r.applied == nil {
		r.applied, r.reported = map[addrs.Object]appliedConfig{}, map[addrs.Object]report{}
	}
	if err := r.settle(ctx); err != nil {
		return err
	}
	labels, err := NodeLabels(ctx, r.Dyn, r.Node)
	if err != nil {
		return err
	}
	entries, err := List(ctx, r.Dyn, r.Namespace, r.Agent, labels)
	if err != nil {
		return err
	}
	now := r.now()
	desired := map[addrs.Object]Entry{}
	// unset are the configs without spec.config: reported, not run.
	unset := map[addrs.Object]Entry{}
	var changes []providers.ObjectChange
	bad := map[addrs.Object]string{}
	for _, e := range entries {
		obj := r.Object(e.Namespace, e.Name)
		if len(e.Config.Config) == 0 {
			// It asks for nothing (setpoint removes a RouteGroup's config
			// when it releases it): whatever runs for it is released, as
			// on an agent setpoint runs itself, and a route group stops
			// routing its VIP.
			unset[obj] = e
			continue
		}
		desired[obj] = e
		prev, had := r.applied[obj]
		if had && prev.config == string(e.Config.Config) && prev.err == "" {
			prev.generation = e.Generation // the same config: nothing to apply
			r.applied[obj] = prev
			continue
		}
		v, err := values.StructuredOf(e.Config.Config)
		if err != nil {
			bad[obj] = fmt.Sprintf("spec.config: want an object (%v)", err)
			continue
		}
		act := action.Update
		if !had {
			act = action.Create
		}
		changes = append(changes, providers.ObjectChange{Address: obj, Action: act,
			Attributes: map[addrs.Path]values.Value{r.Attr: v}, Changed: []addrs.Path{r.Attr}})
	}
	for _, obj := range slices.SortedFunc(maps.Keys(r.applied), func(a, b addrs.Object) int { return strings.Compare(a.String(), b.String()) }) {
		if _, ok := desired[obj]; !ok {
			changes = append(changes, providers.ObjectChange{Address: obj, Action: action.Update, Released: []addrs.Path{r.Attr}})
		}
	}
	released := map[addrs.Object]string{}
	if len(changes) > 0 {
		resp := r.Provider.Apply(ctx, providers.ApplyRequest{Now: now, Changes: changes})
		for i, c := range changes {
			why := "the provider did not answer"
			if i < len(resp.Results) {
				why = resp.Results[i].Err
			}
			e, ok := desired[c.Address]
			if !ok {
				if why == "" {
					delete(r.applied, c.Address)
					delete(r.reported, c.Address)
				} else {
					released[c.Address] = why
					if r.Log != nil {
						r.Log.Error("releasing a config", "object", c.Address.String(), "err", why)
					}
				}
				continue
			}
			r.applied[c.Address] = appliedConfig{config: string(e.Config.Config), generation: e.Generation, err: why}
		}
	}
	for obj, e := range unset {
		msg := noConfig
		if why, failed := released[obj]; failed {
			msg = "releasing it: " + why
		}
		if last, ok := r.reported[obj]; ok && last.generation == e.Generation && last.message == msg {
			// Said once: released configs stay (setpoint deletes no
			// object), and a refresh of each from every node would load
			// the API server for nothing.
			continue
		}
		desired[obj], bad[obj] = e, msg
	}
	return r.report(ctx, now, desired, bad)
}

// settle counts what the provider resumed from the process before as
// applied, once, before the first pass compares: a pass releases what is
// applied and no longer asked for.
func (r *Reconciler) settle(ctx context.Context) error {
	if r.settled {
		return nil
	}
	if rs, ok := r.Provider.(Resumer); ok {
		held, err := rs.Resumed(ctx)
		if err != nil {
			return fmt.Errorf("reading what the agent resumed: %w", err)
		}
		for _, obj := range held {
			if _, ok := r.applied[obj]; !ok {
				r.applied[obj] = appliedConfig{}
			}
		}
	}
	r.settled = true
	return nil
}

// defaultKeyEvery is Reconciler.KeyEvery's default.
const defaultKeyEvery = 10 * time.Second

// reportDue says whether a status entry last written as last is written
// again as next: at once when the generation acted on or the message
// changed, when the key changed and keyEvery has passed since, and
// otherwise every refresh.
func reportDue(last, next report, refresh, keyEvery time.Duration) bool {
	since := next.at.Sub(last.at)
	switch {
	case last.generation != next.generation || last.message != next.message:
		return true
	case last.key != next.key && since >= keyEvery:
		return true
	}
	return since >= refresh
}

// report writes each config's status entry for this node when reportDue
// says so.
func (r *Reconciler) report(ctx context.Context, now time.Time, desired map[addrs.Object]Entry, bad map[addrs.Object]string) error {
	if len(desired) == 0 {
		return nil
	}
	objs := slices.SortedFunc(maps.Keys(desired), func(a, b addrs.Object) int { return strings.Compare(a.String(), b.String()) })
	read := r.Provider.Read(ctx, providers.ReadRequest{Now: now, Addresses: objs})
	var errs []error
	for i, obj := range objs {
		e := desired[obj]
		msg := "ok"
		switch {
		case bad[obj] != "":
			msg = bad[obj]
		case r.applied[obj].err != "":
			msg = r.applied[obj].err
		default:
			for _, d := range read.Diagnostics {
				if d.Address != nil && *d.Address == obj {
					msg = d.Message
				}
			}
		}
		exists := i < len(read.Objects) && read.Objects[i].Exists
		key := ""
		if exists && r.Key != nil {
			key = r.Key(read.Objects[i])
		}
		next := report{generation: e.Generation, message: msg, key: key, at: now}
		if last, ok := r.reported[obj]; ok && !reportDue(last, next, r.Refresh, cmp.Or(r.KeyEvery, defaultKeyEvery)) {
			continue
		}
		var observed any
		if exists && r.Observed != nil {
			observed = r.Observed(read.Objects[i])
		}
		c := &Client{Dyn: r.Dyn, Namespace: e.Namespace, Name: e.Name, Node: r.Node, Now: r.Now}
		if err := c.Report(ctx, e.Generation, msg, observed); err != nil {
			errs = append(errs, err)
			continue
		}
		r.reported[obj] = next
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d report(s) failed, the first: %w", len(errs), errs[0])
	}
	return nil
}

// Run syncs every period until ctx ends; a failed pass is logged and the
// next one tries again.
func (r *Reconciler) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil && r.Log != nil {
			r.Log.Warn("node agent sync", "node", r.Node, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// decode reads a NodeAgentConfig's spec.
func decode(u *unstructured.Unstructured) (Config, error) {
	var out Config
	out.Generation = u.GetGeneration()
	out.Agent, _, _ = unstructured.NestedString(u.Object, "spec", "agent")
	out.NodeSelector, _, _ = unstructured.NestedStringMap(u.Object, "spec", "nodeSelector")
	if cfg, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "config"); ok {
		b, err := json.Marshal(cfg)
		if err != nil {
			return Config{}, fmt.Errorf("nodeagentconfig %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		out.Config = b
	}
	return out, nil
}
