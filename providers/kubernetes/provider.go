// Package kubernetes is the provider for Kubernetes clusters: it reads
// Deployments, autoscaling/v2 HPAs, Knative Services and Pods, and writes
// what setpoint owns on them with server-side apply as field manager
// setpoint, so ownership, conflicts and dry runs are the API server's own.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/setpoint-dev/setpoint/providers/workload"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/version"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/cluster"
)

// Config is the provider's configuration. The kubeconfig and context come
// from the operator (flags, $KUBECONFIG), never from a spec: setpoint puts
// them here itself.
type Config struct {
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Context    string `json:"context,omitempty"`
	InCluster  bool   `json:"inCluster,omitempty"`
	// QPS and Burst bound the client's request rate (client-go's token
	// bucket); a plan of a thousand objects needs more than its default 5.
	// Default 100/s, bursts of 200.
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Timeout bounds every request.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// HandbackManager is the field manager a released field is handed to: the
// value stays (a server-side apply that merely stopped naming it would
// remove it) and setpoint no longer owns it.
const HandbackManager = "setpoint-released"

// Manager is the field manager setpoint applies as (the gate's name).
const Manager = "setpoint"

// EventComponent is the source of the Events setpoint writes.
const EventComponent = "setpoint"

// maxNodes bounds the node reports read from one NodeAgentConfig.
const maxNodes = 10000

// listThreshold is how many objects of one kind in one namespace a Read
// fetches with one List rather than one GET each.
const listThreshold = 4

// Provider is the kubernetes provider. It holds no state of the world: every
// call reads the API server.
type Provider struct {
	mu      sync.Mutex
	cfg     Config
	rest    *rest.Config
	dyn     dynamic.Interface
	core    k8s.Interface
	timeout time.Duration
	// events says whether Events are written (tests of other things
	// may turn them off).
	events bool
}

var _ providers.Full = (*Provider)(nil)

// New returns an unconfigured provider.
func New() *Provider { return &Provider{events: true} }

// NewForConfig returns a provider talking to the API server of rc.
func NewForConfig(rc *rest.Config) (*Provider, error) {
	p := New()
	if err := p.connect(rc, Config{}); err != nil {
		return nil, err
	}
	return p, nil
}

// Schema lists the kinds and attributes served.
func (p *Provider) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return schemaOf(version.Version), nil
}

// RestConfig builds the client configuration cfg names: in-cluster, or a
// kubeconfig (the explicit path, else $KUBECONFIG, else ~/.kube/config) and
// its context.
func RestConfig(cfg Config) (*rest.Config, error) {
	if cfg.InCluster {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		return rc, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		if _, err := os.Stat(cfg.Kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, errors.Unwrap(err))
		}
		rules.ExplicitPath = cfg.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		where := cfg.Kubeconfig
		if where == "" {
			where = strings.Join(rules.Precedence, ":")
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", where, err)
	}
	return rc, nil
}

// Configure connects to the API server the configuration names and checks
// it answers.
func (p *Provider) Configure(ctx context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	var cfg Config
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return []providers.Diagnostic{{Severity: diag.Error, Message: "kubernetes provider config: " + err.Error()}}
		}
	}
	rc, err := RestConfig(cfg)
	if err != nil {
		return []providers.Diagnostic{{Severity: diag.Error, Message: err.Error(),
			Expected: "a kubeconfig from --kubeconfig or $KUBECONFIG (and --context), or --in-cluster inside a pod"}}
	}
	if err := p.connect(rc, cfg); err != nil {
		return []providers.Diagnostic{{Severity: diag.Error, Message: err.Error()}}
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if _, err := p.core.Discovery().RESTClient().Get().AbsPath("/version").Do(cctx).Raw(); err != nil {
		return []providers.Diagnostic{{Severity: diag.Error, Message: fmt.Sprintf("the API server at %s does not answer: %v", rc.Host, err),
			Expected: "a reachable API server (check the kubeconfig's server and context)"}}
	}
	return nil
}

func (p *Provider) connect(rc *rest.Config, cfg Config) error {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	if rc.QPS == 0 {
		rc.QPS = 100
	}
	if rc.Burst == 0 {
		rc.Burst = 200
	}
	rc.UserAgent = "setpoint/" + version.Version
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := k8s.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg, p.rest, p.dyn, p.core, p.timeout = cfg, rc, dyn, core, timeout
	return nil
}

func (p *Provider) clients() (dynamic.Interface, k8s.Interface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dyn == nil {
		return nil, nil, errors.New("the kubernetes provider is not configured")
	}
	return p.dyn, p.core, nil
}

// Read reads each address; objects of one kind in one namespace are
// fetched with one List when there are several.
func (p *Provider) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	resp := providers.ReadResponse{Objects: make([]providers.Object, len(req.Addresses))}
	dyn, core, err := p.clients()
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: diag.Error, Message: err.Error()})
		return resp
	}
	kn := p.knativePods(core)
	type group struct{ kind, ns string }
	groups := map[group][]int{}
	for i, a := range req.Addresses {
		resp.Objects[i].Address = a
		groups[group{a.Kind, a.Namespace}] = append(groups[group{a.Kind, a.Namespace}], i)
	}
	fail := func(i int, err error) {
		a := req.Addresses[i]
		resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: diag.Error, Address: &a, Message: err.Error()})
	}
	keys := make([]group, 0, len(groups))
	for g := range groups {
		keys = append(keys, g)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].kind+"/"+keys[i].ns < keys[j].kind+"/"+keys[j].ns })
	for _, g := range keys {
		idx := groups[g]
		if g.kind == cluster.Kind {
			for _, i := range idx {
				o, err := p.capiRead(ctx, dyn, req.Addresses[i])
				if err != nil {
					fail(i, err)
					continue
				}
				resp.Objects[i] = o
			}
			continue
		}
		k, err := kindOf(g.kind)
		if err == nil && g.ns == "" && g.kind != "" {
			err = fmt.Errorf("a %s address needs a namespace", g.kind)
		}
		if err != nil {
			for _, i := range idx {
				fail(i, err)
			}
			continue
		}
		if len(idx) >= listThreshold {
			cctx, cancel := context.WithTimeout(ctx, p.timeout)
			l, err := dyn.Resource(k.gvr).Namespace(g.ns).List(cctx, metav1.ListOptions{})
			cancel()
			if err != nil {
				for _, i := range idx {
					fail(i, explain(err, "list", k, g.ns))
				}
				continue
			}
			byName := make(map[string]*unstructured.Unstructured, len(l.Items))
			for j := range l.Items {
				byName[l.Items[j].GetName()] = &l.Items[j]
			}
			for _, i := range idx {
				if u, ok := byName[req.Addresses[i].Name]; ok {
					o, err := p.toObject(ctx, req.Now, kn, k, req.Addresses[i], u)
					if err != nil {
						fail(i, err)
						continue
					}
					resp.Objects[i] = o
				}
			}
			continue
		}
		for _, i := range idx {
			a := req.Addresses[i]
			cctx, cancel := context.WithTimeout(ctx, p.timeout)
			u, err := dyn.Resource(k.gvr).Namespace(a.Namespace).Get(cctx, a.Name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				// Exists stays false.
			case err != nil:
				fail(i, explain(err, "get", k, a.Namespace))
			default:
				o, err := p.toObject(ctx, req.Now, kn, k, a, u)
				if err != nil {
					fail(i, err)
					continue
				}
				resp.Objects[i] = o
			}
		}
	}
	return resp
}

// List lists the objects of a kind whose labels match the selector.
func (p *Provider) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	var resp providers.ListResponse
	dyn, core, err := p.clients()
	if err == nil && req.Kind == cluster.Kind {
		return p.capiList(ctx, dyn, req)
	}
	kn := p.knativePods(core)
	if err == nil {
		var k *kind
		if k, err = kindOf(req.Kind); err == nil {
			cctx, cancel := context.WithTimeout(ctx, p.timeout)
			var l *unstructured.UnstructuredList
			l, err = dyn.Resource(k.gvr).Namespace(req.Namespace).List(cctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(req.Selector).String()})
			cancel()
			if err != nil {
				err = explain(err, "list", k, req.Namespace)
			} else {
				for j := range l.Items {
					u := &l.Items[j]
					a := providers.Address{Provider: req.Provider, Kind: req.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
					o, oerr := p.toObject(ctx, req.Now, kn, k, a, u)
					if oerr != nil {
						resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: diag.Error, Address: &a, Message: oerr.Error()})
						continue
					}
					resp.Objects = append(resp.Objects, o)
				}
				slices.SortFunc(resp.Objects, func(a, b providers.Object) int { return strings.Compare(a.Address.String(), b.Address.String()) })
			}
		}
	}
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: diag.Error, Message: err.Error()})
	}
	return resp
}

// rolledOut says a Deployment's rollout is complete much as kubectl rollout
// status says it: every replica the spec asks for updated and no old
// replica left. Unlike kubectl it does not wait for the updated pods to be
// available: once the old ones are gone, those still starting are what
// every scale-up has (the HPA's too), and a scale-up is no rollout to hold
// changes for.
func rolledOut(u *unstructured.Unstructured) bool {
	want, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !ok {
		want = 1
	}
	n := func(f string) int64 {
		v, _, _ := unstructured.NestedInt64(u.Object, "status", f)
		return v
	}
	updated := n("updatedReplicas")
	if updated >= want && n("replicas") <= updated {
		return true
	}
	// Past its progress deadline the controller has given up, and so does
	// kubectl: a change that might mend it must not wait for it.
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Progressing" && m["status"] == "False" && m["reason"] == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// toObject is what setpoint sees of an API object: the attributes of its
// kind with their managers.
func (p *Provider) toObject(ctx context.Context, now time.Time, kn *knativePods, k *kind, a providers.Address, u *unstructured.Unstructured) (providers.Object, error) {
	o := providers.Object{
		Address:     a,
		Exists:      true,
		Attributes:  map[addrs.Path]values.Value{},
		Managers:    map[addrs.Path]string{},
		Labels:      u.GetLabels(),
		Annotations: u.GetAnnotations(),
		Generation:  u.GetGeneration(),
	}
	if og, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok {
		o.ObservedGeneration = og
		if k.name == KindDeployment && og >= o.Generation && !rolledOut(u) {
			// The deployment controller observes a new generation within
			// milliseconds and then rolls for minutes: a Deployment's
			// generation counts as acted on once its rollout is done, as
			// kubectl rollout status judges it.
			o.ObservedGeneration = o.Generation - 1
		}
	}
	if k.name == KindDeployment {
		o.Repair = interruptedResize(u, now, resizeGrace*p.timeout)
	}
	ms := managedSets(u.GetManagedFields())
	note := func(at attr) error {
		v, ok, err := at.decode(u.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if !ok {
			return nil
		}
		o.Attributes[at.path] = v
		if at.readOnly && at.path.HasPrefix(workload.Status) {
			return nil
		}
		fp, err := fieldPath(at.place())
		if err != nil {
			return err
		}
		if m := managerOf(ms, fp, Manager, at.enc == encStructured); m != "" {
			o.Managers[at.path] = m
		}
		return nil
	}
	for _, at := range k.attrs {
		if k.name == KindKnative && at.path == AttrReadyReplicas {
			continue
		}
		if err := note(at); err != nil {
			return o, err
		}
	}
	if !k.containers.IsZero() {
		for _, c := range containerNames(u.Object, k.containers) {
			for _, which := range []string{"requests", "limits"} {
				at, _ := k.attrOf(containerAttr(k.containers, c, which))
				if err := note(at); err != nil {
					return o, err
				}
			}
		}
	}
	if k.name == KindNodeAgent {
		raw, _ := get(u.Object, pathNodes)
		l, _ := raw.([]any)
		for i, e := range l {
			if i >= maxNodes {
				break
			}
			m, _ := e.(map[string]any)
			n, _ := m["name"].(string)
			if n == "" {
				continue
			}
			for _, which := range []string{"observedGeneration", "message", "observed"} {
				at, _ := k.attrOf(NodeAttr(n, which))
				if v, ok, err := at.decode(u.Object); err == nil && ok {
					o.Attributes[at.path] = v
				}
			}
		}
	}
	if k.name == KindKnative {
		ready, err := kn.ready(ctx, a.Namespace, a.Name)
		if err != nil {
			return o, err
		}
		o.Attributes[AttrReadyReplicas] = values.CountOf(ready)
	}
	return o, nil
}

// knativeLabel is the label Knative puts on a service's pods.
const knativeLabel = "serving.knative.dev/service"

// knativePods counts Knative services' ready pods for one Read or List:
// Knative's status has no replica count, so they are its pods labelled
// with the service; one List per namespace serves every service in it.
type knativePods struct {
	p    *Provider
	core k8s.Interface
	byNS map[string]map[string]int64 // namespace → service → ready pods
}

func (p *Provider) knativePods(core k8s.Interface) *knativePods {
	return &knativePods{p: p, core: core, byNS: map[string]map[string]int64{}}
}

func (kn *knativePods) ready(ctx context.Context, ns, svc string) (int64, error) {
	if byService, ok := kn.byNS[ns]; ok {
		return byService[svc], nil
	}
	cctx, cancel := context.WithTimeout(ctx, kn.p.timeout)
	defer cancel()
	pods, err := kn.core.CoreV1().Pods(ns).List(cctx, metav1.ListOptions{LabelSelector: knativeLabel})
	if err != nil {
		return 0, explain(err, "list", kinds[KindPod], ns)
	}
	byService := map[string]int64{}
	for i := range pods.Items {
		if podReady(&pods.Items[i]) {
			byService[pods.Items[i].Labels[knativeLabel]]++
		}
	}
	kn.byNS[ns] = byService
	return byService[svc], nil
}

// explain words an API error so it names the verb, the resource and the
// namespace (the API server's forbidden message already does).
func explain(err error, verb string, k *kind, ns string) error {
	if apierrors.IsForbidden(err) {
		return err
	}
	res := k.gvr.Resource
	if k.gvr.Group != "" {
		res += "." + k.gvr.Group
	}
	where := "in namespace " + ns
	if ns == "" {
		where = "in every namespace"
	}
	return fmt.Errorf("%s %s %s: %w", verb, res, where, err)
}

// Signals: the kubernetes provider has no samples of its own (metrics come
// from Prometheus or the embedded store).
func (p *Provider) Signals(_ context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	return providers.SignalsResponse{Cursor: req.Cursor}
}

// Events sends nothing yet (the schema says so): watch's tick re-reads the
// cluster. A watch on the targets' kinds would reconcile on change.
func (p *Provider) Events(ctx context.Context, _ time.Time, _ func(providers.Event) error) error {
	<-ctx.Done()
	return nil
}

// logger is the provider's log (stderr of the plugin process).
var logger = slog.Default()

// checkAction refuses actions this provider does not perform.
func checkAction(c providers.ObjectChange) error {
	switch c.Action {
	case action.Update, action.Create, action.NoOp:
		return nil
	}
	return fmt.Errorf("%s: the kubernetes provider does not %s objects", c.Address, c.Action)
}
