package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/setpoint-dev/setpoint/internal/version"
)

// The pod annotations that ask for a scrape, as Prometheus' example
// kubernetes-pods job reads them.
const (
	AnnotationScrape = "prometheus.io/scrape"
	AnnotationPort   = "prometheus.io/port"
	AnnotationPath   = "prometheus.io/path"
	AnnotationScheme = "prometheus.io/scheme"
)

// PodJob is the job label of the samples scraped from pods.
const PodJob = "kubernetes-pods"

// maxPodTargets bounds one discovery: past it, a cycle would take longer
// than any interval.
const maxPodTargets = 10_000

// maxPodPath bounds a prometheus.io/path annotation.
const maxPodPath = 1024

// PodTarget is one pod's metrics endpoint.
type PodTarget struct {
	Namespace, Pod string
	// URL is built from the pod's IP and the annotations' scheme, port and
	// path, never taken from an annotation whole.
	URL string
	// Instance is the pod's IP and port.
	Instance string
}

// PodDiscovery finds the pods to scrape. The engine process scrapes them
// itself (the store that knows which metric names are wanted is there), so
// discovery is a client of its own rather than a provider call.
type PodDiscovery struct {
	core k8s.Interface
	// AllowLoopback accepts pods whose IP is a loopback address: only
	// tests, whose API server has no kubelet and whose pods serve on
	// 127.0.0.1. A real pod never has one; a forged status that claimed it
	// would point setpoint at its own host.
	AllowLoopback bool
	Log           *slog.Logger

	mu sync.Mutex
	// last are each namespace's targets at its last successful list, used
	// while a list fails: an API server hiccup must not make every pod's
	// series vanish.
	last map[string][]PodTarget
	// said is the problem last logged per pod (or namespace), so a pod
	// with a bad annotation is reported once, not every cycle.
	said map[string]string
}

// NewPodDiscovery returns a discovery on the API server of rc, with a
// request rate of its own (plans' reads must not queue behind it).
func NewPodDiscovery(rc *rest.Config) (*PodDiscovery, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 20, 40
	rc.UserAgent = "setpoint/" + version.Version + " (scrape discovery)"
	core, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("pod discovery client: %w", err)
	}
	return &PodDiscovery{core: core}, nil
}

// Targets lists the pods of the namespaces that ask to be scraped. Pods
// whose annotations are refused are left out and logged once.
func (d *PodDiscovery) Targets(ctx context.Context, namespaces []string) []PodTarget {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		d.last, d.said = map[string][]PodTarget{}, map[string]string{}
	}
	var out []PodTarget
	seen := map[string]bool{}
	for _, ns := range namespaces {
		seen[ns] = true
		// ResourceVersion "0" is served from the API server's watch cache:
		// a list every few seconds costs etcd nothing.
		pods, err := d.core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			d.say(ns+"/", fmt.Sprintf("listing pods to scrape in namespace %s: %v; scraping the pods of the last list", ns, err))
			out = append(out, d.last[ns]...)
			continue
		}
		d.say(ns+"/", "")
		var found []PodTarget
		for i := range pods.Items {
			p := &pods.Items[i]
			t, ok, err := PodScrapeTarget(p, d.AllowLoopback)
			seen[ns+"/"+p.Name] = true
			d.say(ns+"/"+p.Name, errText(err))
			if ok {
				found = append(found, t)
			}
		}
		d.last[ns] = found
		out = append(out, found...)
	}
	const limit = "limit"
	seen[limit] = true
	if len(out) > maxPodTargets {
		d.say(limit, fmt.Sprintf("%d pods ask to be scraped; the first %d are", len(out), maxPodTargets))
		out = out[:maxPodTargets]
	} else {
		d.say(limit, "")
	}
	for k := range d.last {
		if !seen[k] {
			delete(d.last, k)
		}
	}
	for k := range d.said {
		// A namespace's key is "ns/": it stays while ns is listed.
		if !seen[k] && !seen[strings.TrimSuffix(k, "/")] {
			delete(d.said, k)
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// say logs msg for key when it differs from the last said; "" clears it.
func (d *PodDiscovery) say(key, msg string) {
	if d.said[key] == msg {
		return
	}
	if msg == "" {
		delete(d.said, key)
		return
	}
	d.said[key] = msg
	d.logger().Warn("scrape discovery", "what", key, "problem", msg)
}

func (d *PodDiscovery) logger() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.Default()
}

// podPath is an absolute URL path of RFC 3986 characters: no query, no
// fragment, nothing a URL parser could read as another part.
var podPath = regexp.MustCompile(`^/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$`)

// podPort is a port written in decimal, without sign or spaces.
var podPort = regexp.MustCompile(`^[0-9]{1,5}$`)

// PodScrapeTarget is the endpoint a pod's annotations ask to be scraped
// at. ok is false when the pod asks for nothing or is not running; err
// says why what it asks for is refused. Only the pod's own IP is ever
// used: the annotations choose the scheme, the port and the path, each
// checked, so no annotation can make setpoint fetch another address.
func PodScrapeTarget(p *corev1.Pod, allowLoopback bool) (t PodTarget, ok bool, err error) {
	ann := p.Annotations
	if ann[AnnotationScrape] != "true" || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		// A pod that is not running may have handed its IP to another.
		return PodTarget{}, false, nil
	}
	if p.Spec.HostNetwork {
		// Its IP is the node's: the annotations would choose a port of
		// the node (its kubelet, anything listening there).
		return PodTarget{}, false, fmt.Errorf("the pod uses the host's network: its address is the node's")
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil {
		return PodTarget{}, false, fmt.Errorf("status.podIP %q is not an IP address", p.Status.PodIP)
	}
	ip = ip.Unmap()
	switch {
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsLinkLocalUnicast(), ip.Zone() != "":
		// Link-local holds cloud metadata services.
		return PodTarget{}, false, fmt.Errorf("status.podIP %s is not a pod's address", ip)
	case ip.IsLoopback() && !allowLoopback:
		return PodTarget{}, false, fmt.Errorf("status.podIP %s is a loopback address", ip)
	}
	scheme := ann[AnnotationScheme]
	switch scheme {
	case "":
		scheme = "http"
	case "http", "https":
	default:
		return PodTarget{}, false, fmt.Errorf("annotation %s %q: want http or https", AnnotationScheme, scheme)
	}
	port, err := scrapePort(p)
	if err != nil {
		return PodTarget{}, false, err
	}
	path, given := ann[AnnotationPath]
	if !given {
		path = "/metrics"
	}
	if len(path) > maxPodPath || !podPath.MatchString(path) {
		return PodTarget{}, false, fmt.Errorf("annotation %s %q: want a path starting with / without query, fragment, spaces or other characters a URL path cannot hold (at most %d)", AnnotationPath, path, maxPodPath)
	}
	if _, err := url.PathUnescape(path); err != nil {
		return PodTarget{}, false, fmt.Errorf("annotation %s %q: %w", AnnotationPath, path, err)
	}
	hostport := netip.AddrPortFrom(ip, port).String()
	raw := scheme + "://" + hostport + path
	// The parts were checked one by one; the whole must read back as them.
	u, err := url.Parse(raw)
	if err != nil || u.Host != hostport || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return PodTarget{}, false, fmt.Errorf("annotations make the URL %q, which does not read back as the pod's own address", raw)
	}
	return PodTarget{Namespace: p.Namespace, Pod: p.Name, URL: raw, Instance: hostport}, true, nil
}

// scrapePort is the prometheus.io/port annotation or, without one, the
// pod's one declared TCP port.
func scrapePort(p *corev1.Pod) (uint16, error) {
	if s, ok := p.Annotations[AnnotationPort]; ok {
		n, err := strconv.Atoi(s)
		if !podPort.MatchString(s) || err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("annotation %s %q: want a port from 1 to 65535", AnnotationPort, s)
		}
		return uint16(n), nil
	}
	var ports []int32
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) && !slices.Contains(ports, cp.ContainerPort) {
				ports = append(ports, cp.ContainerPort)
			}
		}
	}
	if len(ports) != 1 || ports[0] < 1 || ports[0] > 65535 {
		return 0, errors.New("no " + AnnotationPort + " annotation, and not exactly one declared TCP container port to default to")
	}
	return uint16(ports[0]), nil
}
