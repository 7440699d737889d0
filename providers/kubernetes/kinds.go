package kubernetes

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/workload"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// Kinds this provider serves: the sim world's names, so one spec plans
// the same against both.
const (
	KindDeployment = workload.Deployment
	KindHPA        = workload.HPA
	KindKnative    = workload.Knative
	KindPod        = "Pod"
	// KindNodeAgent is the custom resource the node agents (NRI, eBPF)
	// reconcile from in a cluster (deploy/crds).
	KindNodeAgent = nodeagent.Kind
)

// Attribute paths, the same as the sim world's.
var (
	AttrReplicas        = workload.Replicas
	AttrReadyReplicas   = workload.ReadyReplicas
	AttrPodIP           = workload.PodIP
	AttrMinReplicas     = workload.MinReplicas
	AttrMaxReplicas     = workload.MaxReplicas
	AttrCurrentReplicas = workload.CurrentReplicas
	AttrDesiredReplicas = workload.DesiredReplicas
	// AttrTargetCPU is, in autoscaling/v2, the averageUtilization of the
	// HPA's one cpu Resource metric with a Utilization target; its place
	// is the whole metrics list (an atomic list: whoever sets it owns
	// every metric, so setpoint writes the list as it is with only that
	// number changed).
	AttrTargetCPU = workload.TargetCPU
	// AttrScaleDownWindow is the HPA's scale-down stabilization window,
	// a field of its own (the behavior's policies stay the user's).
	AttrScaleDownWindow = workload.ScaleDownWindow
	AttrMinScale        = workload.MinScale
	AttrMaxScale        = workload.MaxScale

	pathTemplateContainers = workload.Containers
	pathPodContainers      = addrs.MustPath("spec.containers")
	pathMetrics            = addrs.MustPath("spec.metrics")
	pathNodes              = nodeagent.Nodes

	AttrAgent       = nodeagent.Agent
	AttrAgentConfig = nodeagent.Config
)

// NodeAttr is the path of a node agent's report (which: observedGeneration,
// message or observed) in a NodeAgentConfig's status.
var NodeAttr = nodeagent.NodeAttr

// ContainerAttr is the path of a pod template container's memory request
// or limit (which: "requests" or "limits").
func ContainerAttr(container, which string) addrs.Path {
	return containerAttr(pathTemplateContainers, container, which)
}

func containerAttr(base addrs.Path, container, which string) addrs.Path {
	return workload.ContainerAttrAt(base, container, which)
}

// encoding is how a typed value is written in the object.
type encoding int

const (
	encInt        encoding = iota // a JSON integer
	encQuantity                   // a resource quantity string ("512Mi")
	encIntString                  // an integer in a string (an annotation)
	encCPUTarget                  // the target of an HPA's one CPU utilisation metric, in its metrics list
	encString                     // a JSON string
	encStructured                 // a JSON object, as it is
)

// attr is one attribute a kind serves.
type attr struct {
	path     addrs.Path
	typ      values.Type
	enc      encoding
	readOnly bool
	// upTo, when above 0, is the largest value the API server accepts.
	upTo int64
	// unset, when valid, is what the field means when it is absent (the
	// controller's own default), read as its value so that the user's
	// value recorded at adoption can be put back.
	unset values.Value
	desc  string
}

// kind is one kind this provider serves: where it lives in the API.
type kind struct {
	name       string
	gvr        schema.GroupVersionResource
	apiVersion string
	apiKind    string
	attrs      []attr
	// containers is where its pod spec's containers are (memory attributes
	// are served per container); zero when it has none.
	containers addrs.Path
	// memoryWritable is false where a server-side apply would own the
	// whole container list (a custom resource without list-map markers,
	// as Knative's CRD is).
	memoryWritable bool
}

var kinds = map[string]*kind{
	KindDeployment: {
		name: KindDeployment, gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		apiVersion: "apps/v1", apiKind: "Deployment",
		attrs: []attr{
			{path: AttrReplicas, typ: values.Count, enc: encInt, desc: "replicas (written by the HPA when there is one)"},
			{path: AttrReadyReplicas, typ: values.Count, enc: encInt, readOnly: true, desc: "pods serving"},
			{path: workload.ReplicaFailure, typ: values.String, enc: encString, readOnly: true, desc: "True while its pods cannot be created (a quota exceeded)"},
			{path: workload.ReplicaFailureMessage, typ: values.String, enc: encString, readOnly: true, desc: "why its pods cannot be created"},
		},
		containers: pathTemplateContainers, memoryWritable: true,
	},
	KindHPA: {
		name: KindHPA, gvr: schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"},
		apiVersion: "autoscaling/v2", apiKind: "HorizontalPodAutoscaler",
		attrs: []attr{
			{path: AttrMinReplicas, typ: values.Count, enc: encInt, desc: "at least 1"},
			{path: AttrMaxReplicas, typ: values.Count, enc: encInt, desc: "at least minReplicas"},
			{path: AttrTargetCPU, typ: values.Count, enc: encCPUTarget, desc: "CPU utilisation target in percent of requests: the HPA's one cpu Utilization metric " +
				"(absent with none, or two); written into its metrics list with the other metrics kept, so setpoint owns the list; never adds a metric"},
			{path: AttrScaleDownWindow, typ: values.Count, enc: encInt, upTo: 3600, unset: values.CountOf(300), desc: "scale-down stabilization window in seconds, 0 to 3600 " +
				"(read as 300, what the HPA waits, when unset); the scale-down policies stay the user's"},
			{path: AttrCurrentReplicas, typ: values.Count, enc: encInt, readOnly: true, desc: "replicas at the last sync"},
			{path: AttrDesiredReplicas, typ: values.Count, enc: encInt, readOnly: true, desc: "replicas the last sync asked for"},
			// What it scales, by which setpoint finds a workload's HPA
			// whatever the HPA's name.
			{path: workload.ScaleTargetKind, typ: values.String, enc: encString, readOnly: true, desc: "the kind of the workload it scales"},
			{path: workload.ScaleTargetName, typ: values.String, enc: encString, readOnly: true, desc: "the name of the workload it scales"},
		},
	},
	KindKnative: {
		name: KindKnative, gvr: schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"},
		apiVersion: "serving.knative.dev/v1", apiKind: "Service",
		attrs: []attr{
			{path: AttrMinScale, typ: values.Count, enc: encIntString, desc: "pods kept however idle"},
			{path: AttrMaxScale, typ: values.Count, enc: encIntString, desc: "at most this many pods (0: no bound)"},
			{path: AttrReadyReplicas, typ: values.Count, enc: encInt, readOnly: true, desc: "ready pods of the service"},
		},
		containers: pathTemplateContainers,
	},
	KindNodeAgent: {
		name: KindNodeAgent, gvr: schema.GroupVersionResource{Group: "setpoint.dev", Version: "v1alpha1", Resource: "nodeagentconfigs"},
		apiVersion: "setpoint.dev/v1alpha1", apiKind: "NodeAgentConfig",
		attrs: []attr{
			{path: AttrAgent, typ: values.String, enc: encString, desc: "nri or ebpf: which agents take it"},
			{path: AttrAgentConfig, typ: values.Structured, enc: encStructured, desc: "the agents' configuration"},
			{path: nodeagent.NodeSelector, typ: values.Structured, enc: encStructured, desc: "which nodes' agents take it, by label"},
		},
	},
	KindPod: {
		name: KindPod, gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"},
		apiVersion: "v1", apiKind: "Pod",
		attrs: []attr{
			{path: AttrPodIP, typ: values.String, enc: encString, readOnly: true, desc: "the pod's IP (a RouteGroup's backend)"},
			{path: workload.PodReady, typ: values.String, enc: encString, readOnly: true, desc: "the pod's Ready condition: True, False or Unknown"},
		},
		containers: pathPodContainers,
	},
}

func kindOf(name string) (*kind, error) {
	k, ok := kinds[name]
	if !ok {
		return nil, fmt.Errorf("the kubernetes provider has no kind %s (it serves Deployment, HorizontalPodAutoscaler, KnativeService, Pod)", name)
	}
	return k, nil
}

// attrOf finds the attribute at p of kind k (a container path matches the
// per-container attributes).
func (k *kind) attrOf(p addrs.Path) (attr, bool) {
	for _, a := range k.attrs {
		if a.path == p {
			return a, true
		}
	}
	if k.name == KindNodeAgent && p.HasPrefix(pathNodes) {
		if n, ok := p.Selected("name"); ok {
			for which, t := range map[string]values.Type{"observedGeneration": values.Count, "message": values.String, "observed": values.Structured} {
				if NodeAttr(n, which) == p {
					enc := map[values.Type]encoding{values.Count: encInt, values.String: encString, values.Structured: encStructured}[t]
					return attr{path: p, typ: t, enc: enc, readOnly: true}, true
				}
			}
		}
	}
	if !k.containers.IsZero() && p.HasPrefix(k.containers) {
		if c, ok := p.Selected("name"); ok {
			for _, which := range []string{"requests", "limits"} {
				if containerAttr(k.containers, c, which) == p {
					return attr{path: p, typ: values.Bytes, enc: encQuantity, readOnly: !k.memoryWritable}, true
				}
			}
		}
	}
	return attr{}, false
}

// decode reads the value of a at its place in obj.
func (a attr) decode(obj map[string]any) (values.Value, bool, error) {
	if a.enc == encCPUTarget {
		return cpuTarget(obj)
	}
	raw, ok := get(obj, a.path)
	if !ok || raw == nil {
		if a.unset.IsValid() {
			return a.unset, true, nil
		}
		return values.Value{}, false, nil
	}
	switch a.enc {
	case encInt:
		n, ok := asInt(raw)
		if !ok {
			return values.Value{}, false, fmt.Errorf("%s: %v is not an integer", a.path, raw)
		}
		return values.Numeric(a.typ, n), true, nil
	case encIntString:
		s, _ := raw.(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return values.Value{}, false, fmt.Errorf("%s: %q is not an integer", a.path, s)
		}
		return values.Numeric(a.typ, n), true, nil
	case encString:
		str, ok := raw.(string)
		if !ok {
			return values.Value{}, false, fmt.Errorf("%s: %v is not a string", a.path, raw)
		}
		return values.StringOf(str), true, nil
	case encStructured:
		b, err := json.Marshal(raw)
		if err != nil {
			return values.Value{}, false, fmt.Errorf("%s: %w", a.path, err)
		}
		v, err := values.StructuredOf(b)
		if err != nil {
			return values.Value{}, false, fmt.Errorf("%s: %w", a.path, err)
		}
		return v, true, nil
	case encQuantity:
		var q resource.Quantity
		switch v := raw.(type) {
		case string:
			var err error
			if q, err = resource.ParseQuantity(v); err != nil {
				return values.Value{}, false, fmt.Errorf("%s: %q is not a quantity", a.path, v)
			}
		default:
			n, ok := asInt(raw)
			if !ok {
				return values.Value{}, false, fmt.Errorf("%s: %v is not a quantity", a.path, raw)
			}
			q = *resource.NewQuantity(n, resource.BinarySI)
		}
		return values.Numeric(a.typ, q.Value()), true, nil
	}
	return values.Value{}, false, nil
}

// encode writes v at a's place in obj. base is the object as it is (nil
// for one setpoint creates): a value whose place holds more than it, the
// HPA's metrics list, is written into base's.
func (a attr) encode(obj, base map[string]any, v values.Value) error {
	if v.Type() != a.typ {
		return fmt.Errorf("%s: want a %s, got the %s %s", a.path, a.typ, v.Type(), v)
	}
	switch a.enc {
	case encInt:
		return set(obj, a.path, v.Int())
	case encIntString:
		return set(obj, a.path, strconv.FormatInt(v.Int(), 10))
	case encString:
		return set(obj, a.path, v.Str())
	case encStructured:
		var x any
		if err := json.Unmarshal(v.JSON(), &x); err != nil {
			return fmt.Errorf("%s: %w", a.path, err)
		}
		return set(obj, a.path, x)
	case encQuantity:
		return set(obj, a.path, resource.NewQuantity(v.Int(), resource.BinarySI).String())
	case encCPUTarget:
		if v.Int() < 1 || v.Int() > math.MaxInt32 {
			return fmt.Errorf("%s: %d is not a utilisation percentage", a.path, v.Int())
		}
		l, err := withCPUTarget(base, v.Int())
		if err != nil {
			return fmt.Errorf("%s: %w", a.path, err)
		}
		return set(obj, pathMetrics, l)
	}
	return nil
}

// place is where a's value lives in the object (what a manager owns).
func (a attr) place() addrs.Path {
	if a.enc == encCPUTarget {
		return pathMetrics
	}
	return a.path
}

// cpuTarget reads an HPA's CPU utilisation target: present only when its
// metrics have exactly one cpu Resource metric with a Utilization target,
// whatever other metrics are beside it.
func cpuTarget(obj map[string]any) (values.Value, bool, error) {
	raw, _ := get(obj, pathMetrics)
	l, _ := raw.([]any)
	i := cpuMetrics(l)
	if len(i) != 1 {
		return values.Value{}, false, nil
	}
	n, ok := asInt(utilisationOf(l[i[0]])["averageUtilization"])
	if !ok {
		return values.Value{}, false, nil
	}
	return values.CountOf(n), true, nil
}

// cpuMetrics are the indexes of a metrics list's cpu Resource metrics
// with a Utilization target.
func cpuMetrics(l []any) []int {
	var out []int
	for i, e := range l {
		if utilisationOf(e) != nil {
			out = append(out, i)
		}
	}
	return out
}

// utilisationOf is a metric's target when the metric is a cpu Resource
// metric with a Utilization target, else nil.
func utilisationOf(e any) map[string]any {
	m, _ := e.(map[string]any)
	if m["type"] != "Resource" {
		return nil
	}
	r, _ := m["resource"].(map[string]any)
	t, _ := r["target"].(map[string]any)
	if r["name"] != "cpu" || t["type"] != "Utilization" {
		return nil
	}
	return t
}

// withCPUTarget is the metrics list to apply for a CPU utilisation target
// of pct: for an HPA setpoint creates (base nil), that one metric; for
// one that exists, its own list with only the target's number changed,
// every other metric carried as it is, in its order (the list is atomic:
// an apply of it owns it whole, and what it leaves out is gone). An HPA
// without exactly one such metric is refused: setpoint does not add a
// metric the user did not choose, nor guess which of two it owns.
func withCPUTarget(base map[string]any, pct int64) ([]any, error) {
	if base == nil {
		return []any{map[string]any{
			"type": "Resource",
			"resource": map[string]any{"name": "cpu",
				"target": map[string]any{"type": "Utilization", "averageUtilization": pct}},
		}}, nil
	}
	raw, _ := get(base, pathMetrics)
	l, _ := raw.([]any)
	switch i := cpuMetrics(l); len(i) {
	case 0:
		return nil, fmt.Errorf("the HPA has no cpu Resource metric with a Utilization target (its metrics: %s): setpoint changes the target of the user's CPU metric, it does not add a metric the user did not choose", metricNames(l))
	case 1:
		out := runtime.DeepCopyJSONValue(l).([]any)
		utilisationOf(out[i[0]])["averageUtilization"] = pct
		return out, nil
	default:
		return nil, fmt.Errorf("the HPA has %d cpu Resource metrics with a Utilization target: which one setpoint would own is not clear, so it owns none", len(i))
	}
}

// metricNames says what a metrics list holds, for a message: "Pods
// requests_per_second, Resource memory", "none".
func metricNames(l []any) string {
	var out []string
	for _, e := range l {
		m, _ := e.(map[string]any)
		typ, _ := m["type"].(string)
		name := ""
		for _, src := range []string{"resource", "containerResource", "pods", "object", "external"} {
			s, _ := m[src].(map[string]any)
			if n, ok := s["name"].(string); ok {
				name = n
			} else if mt, _ := s["metric"].(map[string]any); mt != nil {
				name, _ = mt["name"].(string)
			}
			if name != "" {
				break
			}
		}
		// Both come from the cluster: quoted, so a name cannot pass for
		// the message around it.
		out = append(out, strconv.Quote(diag.Cut(strings.TrimSpace(typ+" "+name), maxQuoted)))
	}
	if len(out) == 0 {
		return "none"
	}
	return diag.Cut(strings.Join(out, ", "), maxQuoted)
}

func asInt(raw any) (int64, bool) {
	switch v := raw.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return 0, false
		}
		return int64(v), true
	}
	return 0, false
}

// containerNames lists the named containers of obj's pod spec at base.
func containerNames(obj map[string]any, base addrs.Path) []string {
	raw, _ := get(obj, base)
	l, _ := raw.([]any)
	var out []string
	for _, e := range l {
		m, _ := e.(map[string]any)
		if n, ok := m["name"].(string); ok && n != "" {
			out = append(out, n)
		}
	}
	return out
}

// schemaOf is the provider's schema: kinds and attributes with types. NAME
// in a container path stands for any container's name.
func schemaOf(version string) providers.Schema {
	s := providers.Schema{Name: "kubernetes", Version: version}
	for _, name := range []string{KindDeployment, KindHPA, KindKnative, KindNodeAgent, KindPod} {
		k := kinds[name]
		ks := providers.KindSchema{Kind: name}
		for _, a := range k.attrs {
			ks.Attributes = append(ks.Attributes, providers.AttributeSchema{Path: a.path, Type: a.typ, ReadOnly: a.readOnly, Description: a.desc})
		}
		if !k.containers.IsZero() {
			note := "a container's memory request (at most its limit)"
			if !k.memoryWritable {
				note = "read only: the CRD makes the container list atomic, so an apply would own every container"
			}
			if name == KindPod {
				note = "a running pod's memory, changed only through the resize subresource"
			}
			ks.Attributes = append(ks.Attributes,
				providers.AttributeSchema{Path: containerAttr(k.containers, "NAME", "requests"), Type: values.Bytes, ReadOnly: !k.memoryWritable, Description: note},
				providers.AttributeSchema{Path: containerAttr(k.containers, "NAME", "limits"), Type: values.Bytes, ReadOnly: !k.memoryWritable, Description: "a container's memory limit"})
		}
		if name == KindNodeAgent {
			for which, t := range map[string]values.Type{"observedGeneration": values.Count, "message": values.String, "observed": values.Structured} {
				ks.Attributes = append(ks.Attributes, providers.AttributeSchema{Path: NodeAttr("NODE", which), Type: t, ReadOnly: true, Description: "what the agent on NODE reports"})
			}
			slices.SortFunc(ks.Attributes, func(a, b providers.AttributeSchema) int { return strings.Compare(a.Path.String(), b.Path.String()) })
		}
		s.Kinds = append(s.Kinds, ks)
	}
	return s
}

// Encode writes attributes of a kind into an object's unstructured form,
// as an apply would: for fixtures and tools that make objects the way
// setpoint reads them.
func Encode(kindName string, obj map[string]any, attrs map[addrs.Path]values.Value) error {
	k, err := kindOf(kindName)
	if err != nil {
		return err
	}
	for path, v := range attrs {
		at, ok := k.attrOf(path)
		if !ok {
			return fmt.Errorf("%s: %s has no such attribute", path, kindName)
		}
		// obj is its own base: a metrics list it holds is written into.
		var base map[string]any
		if _, ok := get(obj, pathMetrics); ok {
			base = obj
		}
		if err := at.encode(obj, base, v); err != nil {
			return err
		}
	}
	return nil
}
