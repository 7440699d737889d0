package spec

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
)

func init() {
	Register(Kind{Name: "RouteGroup", New: func() Document { return &RouteGroup{} }})
}

// RouteGroup shares one service VIP's new connections among equivalent
// backends by their pressure.
type RouteGroup struct {
	Header
	Spec RouteGroupSpec `json:"spec"`
}

// RouteGroupSpec mirrors #RouteGroupSpec.
type RouteGroupSpec struct {
	Target      RouteGroupTarget      `json:"target"`
	VIP         string                `json:"vip"`
	Backends    RouteGroupBackends    `json:"backends"`
	Metrics     RouteGroupMetrics     `json:"metrics"`
	Table       RouteGroupTable       `json:"table"`
	Tick        RouteGroupTick        `json:"tick"`
	Filter      RouteGroupFilter      `json:"filter"`
	Pressure    RouteGroupPressure    `json:"pressure"`
	Saturation  RouteGroupSaturation  `json:"saturation"`
	Viscosity   RouteGroupViscosity   `json:"viscosity"`
	SkewGuard   RouteGroupSkewGuard   `json:"skewGuard"`
	Regimes     RouteGroupRegimes     `json:"regimes"`
	Admission   RouteGroupAdmission   `json:"admission"`
	Failsafe    RouteGroupFailsafe    `json:"failsafe"`
	Paused      bool                  `json:"paused"`
	Enforcement RouteGroupEnforcement `json:"enforcement"`
}

// RouteGroupTarget names the provider serving the VIP; "" is the
// Environment's first.
type RouteGroupTarget struct {
	Provider string `json:"provider,omitempty"`
}

// RouteGroupBackends is exactly one of: pods by label (Selector, Port and
// Namespace, "" for the RouteGroup's) or fixed Endpoints ("IPv4:port").
type RouteGroupBackends struct {
	Selector  map[string]string `json:"selector,omitempty"`
	Port      int               `json:"port,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Endpoints []string          `json:"endpoints,omitempty"`
}

// RouteGroupMetrics says how each backend's Prometheus endpoint is scraped:
// the path, the port (0: the backend's) and the names of its three gauges.
type RouteGroupMetrics struct {
	Path      string `json:"path"`
	Port      int    `json:"port,omitempty"`
	Queue     string `json:"queue"`
	Latency   string `json:"latency"`   // seconds
	ErrorRate string `json:"errorRate"` // 0 to 1
}

// RouteGroupTable is the VIP's slot table: its size (a prime) and builder.
type RouteGroupTable struct {
	Slots   int    `json:"slots"`
	Builder string `json:"builder"`
}

// Table builders.
const (
	BuilderMaglev    = "maglev"
	BuilderReplicate = "replicate"
)

// RouteGroupTick is the loop's period and its bounded jitter.
type RouteGroupTick struct {
	Every  Duration `json:"every"`
	Jitter Percent  `json:"jitter"`
}

// RouteGroupFilter is the EWMA applied to each signal.
type RouteGroupFilter struct {
	Alpha float64 `json:"alpha"`
}

// RouteGroupPressure turns a backend's signals into its pressure.
type RouteGroupPressure struct {
	Weights      RouteGroupWeights      `json:"weights"`
	Refs         RouteGroupRefs         `json:"refs"`
	ErrorClip    float64                `json:"errorClip"`
	ErrorPenalty RouteGroupErrorPenalty `json:"errorPenalty"`
}

// RouteGroupWeights are how much each signal counts.
type RouteGroupWeights struct {
	Queue   float64 `json:"queue"`
	Latency float64 `json:"latency"`
	Errors  float64 `json:"errors"`
}

// RouteGroupRefs are what each signal is divided by.
type RouteGroupRefs struct {
	Queue     float64  `json:"queue"`
	Latency   Duration `json:"latency"`
	ErrorRate Percent  `json:"errorRate"`
}

// RouteGroupErrorPenalty adds Add to the pressure of a backend whose error
// rate is above Above.
type RouteGroupErrorPenalty struct {
	Above Percent `json:"above"`
	Add   float64 `json:"add"`
}

// RouteGroupSaturation: a backend whose queue would reach QueueLimit
// within Horizon counts as crisis; QueueLimit 0 is off.
type RouteGroupSaturation struct {
	QueueLimit float64  `json:"queueLimit,omitempty"`
	Horizon    Duration `json:"horizon"`
}

// RouteGroupViscosity bounds each backend's slot count change per tick.
type RouteGroupViscosity struct {
	MaxSlotsPerTick int `json:"maxSlotsPerTick"`
}

// RouteGroupSkewGuard shrinks the step when the observed split drifts from
// the weights.
type RouteGroupSkewGuard struct {
	Epsilon     float64 `json:"epsilon"`
	Shrink      float64 `json:"shrink"`
	MinConnects int     `json:"minConnects"`
}

// RouteGroupRegimes are the thresholds on the mean pressure.
type RouteGroupRegimes struct {
	TransitionAbove float64 `json:"transitionAbove"`
	CrisisAbove     float64 `json:"crisisAbove"`
	RecoveryTicks   int     `json:"recoveryTicks"`
}

// RouteGroupAdmission is what soft and hard admission let through.
// HardBudget is a rate, "100/s" or "6000/m" (see BudgetPerSecond); Burst
// 0 means one second's worth of it.
type RouteGroupAdmission struct {
	SoftShed   Percent `json:"softShed"`
	HardBudget string  `json:"hardBudget"`
	Burst      int     `json:"burst,omitempty"`
}

// RouteGroupFailsafe is when the dataplane's failsafe takes over.
type RouteGroupFailsafe struct {
	After Duration `json:"after"`
}

// RouteGroupEnforcement is the mode of the one dimension, the table.
type RouteGroupEnforcement struct {
	Table Mode `json:"table"`
}

// Bounds of a RouteGroup's table size and tick.
const (
	MinRouteGroupSlots = 3
	MaxRouteGroupSlots = routegroup.MaxSlots // 2¹⁷ − 1, a prime
	MinRouteGroupTick  = 10 * time.Millisecond
	MaxRouteGroupTick  = 10 * time.Second
	// MaxRouteGroupJitter bounds the jitter, as a share of the tick.
	MaxRouteGroupJitter Percent = 0.5
)

// VIPAddr parses the VIP, "127.100.0.1:8080/tcp", into its IPv4 address
// and port and its protocol, tcp or udp.
func (s RouteGroupSpec) VIPAddr() (netip.AddrPort, string, error) {
	addr, proto, ok := strings.Cut(s.VIP, "/")
	if !ok || (proto != "tcp" && proto != "udp") {
		return netip.AddrPort{}, "", fmt.Errorf("invalid VIP %q: it does not end in /tcp or /udp", s.VIP)
	}
	ap, err := parseIPv4Port(addr)
	if err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("invalid VIP %q: %w", s.VIP, err)
	}
	return ap, proto, nil
}

// parseIPv4Port parses "127.0.0.1:9001": an IPv4 address and a port from
// 1 to 65535.
func parseIPv4Port(s string) (netip.AddrPort, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return netip.AddrPort{}, errors.New("no port")
	}
	host, port := s[:i], s[i+1:]
	if host == "" {
		return netip.AddrPort{}, errors.New("no address")
	}
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() {
		return netip.AddrPort{}, fmt.Errorf("%s is not an IPv4 address", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("port %s is out of range", port)
	}
	return netip.AddrPortFrom(a, uint16(p)), nil
}

// BudgetPerSecond is the hard admission budget, "100/s" or "6000/m", in
// connects per second; an error unless it is a finite rate above 0.
func (s RouteGroupSpec) BudgetPerSecond() (float64, error) {
	b := s.Admission.HardBudget
	num, unit, ok := strings.Cut(b, "/")
	per := map[string]float64{"s": 1, "m": 60}[unit]
	// ParseFloat also reads what is no rate: 1e3, +5, 0x10, 1_000, Inf.
	if !ok || per == 0 || num == "" || strings.Trim(num, "0123456789.") != "" {
		return 0, fmt.Errorf("invalid hard budget %q", b)
	}
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("hard budget %q is too large", b)
	case err != nil:
		return 0, fmt.Errorf("invalid hard budget %q", b)
	case f <= 0:
		return 0, fmt.Errorf("hard budget %q admits nothing", b)
	}
	return f / per, nil
}

// nearestPrimes returns the largest prime below n and the smallest above
// it (0 when there is none in [MinRouteGroupSlots, MaxRouteGroupSlots]).
func nearestPrimes(n int) (below, above int) {
	for i := min(n-1, MaxRouteGroupSlots); i >= MinRouteGroupSlots; i-- {
		if routegroup.IsPrime(i) {
			below = i
			break
		}
	}
	for i := max(n+1, MinRouteGroupSlots); i <= MaxRouteGroupSlots; i++ {
		if routegroup.IsPrime(i) {
			above = i
			break
		}
	}
	return below, above
}

var (
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.vip", What: "the VIP is an IPv4 address, a port from 1 to 65535 and tcp or udp", Why: WhyParse, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.backends", What: "a selector and a port, or endpoints, not both", Why: WhyCompare, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.backends.endpoints.*", What: "endpoints parse, are unique once normalised (09001 is 9001), and none is the VIP", Why: WhyParse, Example: "invalid/routegroup-backend-vip.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.table.slots", What: "a prime number of slots (Maglev needs one)", Why: WhyParse, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.tick.*", What: "a tick from 10ms to 10s, its jitter at most 50% of it", Why: WhyParse, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.pressure.*", What: "some pressure weight above 0, every reference above 0", Why: WhyCompare, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.regimes.crisisAbove", What: "crisisAbove > transitionAbove", Why: WhyCompare, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.failsafe.after", What: "the failsafe waits longer than two jittered ticks and a scrape, so a healthy loop never trips it", Why: WhyCompare, Example: "invalid/routegroup-errors.yaml"})
	_ = RegisterCheck(Check{Kind: "RouteGroup", Path: "spec.admission.hardBudget", What: "the hard budget admits something", Why: WhyParse, Example: "invalid/routegroup-errors.yaml"})
)

// Check: the VIP parses; the backends are a selector and a port or
// endpoints, not both, and the endpoints parse, are unique once
// normalised and none is the VIP; the table's size is a prime; the tick
// and its jitter are in range; some pressure weight is above 0, and so
// are the references; crisis is above transition; the failsafe waits at
// least two ticks; the hard budget admits something.
func (r *RouteGroup) Check() []FieldError {
	var errs []FieldError
	sp := r.Spec
	if _, _, err := sp.VIPAddr(); err != nil {
		errs = append(errs, FieldError{Path: "spec.vip", Message: err.Error(),
			Expected: "an IPv4 address, a port from 1 to 65535 and tcp or udp, like 127.100.0.1:8080/tcp"})
	}
	errs = append(errs, r.checkBackends()...)
	switch n := sp.Table.Slots; {
	case n < MinRouteGroupSlots || n > MaxRouteGroupSlots:
		errs = append(errs, FieldError{Path: "spec.table.slots", Message: fmt.Sprintf("%d slots is out of range", n),
			Expected: fmt.Sprintf("a prime from %d to %d", MinRouteGroupSlots, MaxRouteGroupSlots)})
	case !routegroup.IsPrime(n):
		below, above := nearestPrimes(n)
		errs = append(errs, FieldError{Path: "spec.table.slots", Message: fmt.Sprintf("%d is not prime: %d or %d", n, below, above),
			Expected: "a prime number of slots, which Maglev needs"})
	}
	if t := sp.Tick.Every.D(); t < MinRouteGroupTick || t > MaxRouteGroupTick {
		errs = append(errs, FieldError{Path: "spec.tick.every", Message: fmt.Sprintf("tick %s is out of range", t),
			Expected: fmt.Sprintf("between %s and %s", MinRouteGroupTick, MaxRouteGroupTick)})
	}
	if j := sp.Tick.Jitter; j > MaxRouteGroupJitter {
		errs = append(errs, FieldError{Path: "spec.tick.jitter", Message: fmt.Sprintf("jitter %s is out of range", j),
			Expected: "at most " + MaxRouteGroupJitter.String() + " of the tick"})
	}
	if w := sp.Pressure.Weights; w.Queue == 0 && w.Latency == 0 && w.Errors == 0 {
		errs = append(errs, FieldError{Path: "spec.pressure.weights", Message: "every pressure weight is 0",
			Expected: "a weight above 0 for queue, latency or errors"})
	}
	if sp.Pressure.Refs.Latency <= 0 {
		errs = append(errs, FieldError{Path: "spec.pressure.refs.latency", Message: fmt.Sprintf("latency reference %s is out of range", sp.Pressure.Refs.Latency),
			Expected: "more than 0s"})
	}
	if sp.Pressure.Refs.ErrorRate <= 0 {
		errs = append(errs, FieldError{Path: "spec.pressure.refs.errorRate", Message: fmt.Sprintf("error rate reference %s is out of range", sp.Pressure.Refs.ErrorRate),
			Expected: "more than 0%"})
	}
	if g := sp.Regimes; g.CrisisAbove <= g.TransitionAbove {
		errs = append(errs, FieldError{Path: "spec.regimes.crisisAbove", Message: fmt.Sprintf("crisisAbove %g is not above transitionAbove %g", g.CrisisAbove, g.TransitionAbove),
			Expected: "crisisAbove > transitionAbove"})
	}
	if after, least := sp.Failsafe.After.D(), routegroup.MinFailsafe(sp.Tick.Every.D(), float64(sp.Tick.Jitter)); after < least {
		errs = append(errs, FieldError{Path: "spec.failsafe.after", Message: fmt.Sprintf("failsafe after %s could trip while the loop is healthy: a tick of %s ± %s, a scrape and one tick more take %s", after, sp.Tick.Every, sp.Tick.Jitter, least),
			Expected: fmt.Sprintf("at least %s", least)})
	}
	if b, err := sp.BudgetPerSecond(); err == nil && b > routegroup.MaxHardBudget {
		errs = append(errs, FieldError{Path: "spec.admission.hardBudget", Message: fmt.Sprintf("hard budget %s is %g connects per second", sp.Admission.HardBudget, b),
			Expected: fmt.Sprintf("at most %d/s", routegroup.MaxHardBudget)})
	} else if err != nil {
		errs = append(errs, FieldError{Path: "spec.admission.hardBudget", Message: err.Error(),
			Expected: `a rate above 0 per second or minute, like "100/s" or "6000/m"`})
	}
	return errs
}

// checkBackends: a selector and a port, or endpoints, each of them an
// IPv4 address and a port other than the VIP's, once. (A selector's pods'
// addresses are not known before a run.)
func (r *RouteGroup) checkBackends() []FieldError {
	var errs []FieldError
	b := r.Spec.Backends
	const either = "a selector and a port, or endpoints"
	switch {
	case len(b.Selector) == 0 && len(b.Endpoints) == 0:
		return []FieldError{{Path: "spec.backends", Message: "no backends", Expected: either}}
	case len(b.Selector) > 0 && len(b.Endpoints) > 0:
		return []FieldError{{Path: "spec.backends.endpoints", Message: "endpoints beside a selector", Expected: either + ", not both"}}
	case len(b.Selector) > 0:
		if b.Port == 0 {
			errs = append(errs, FieldError{Path: "spec.backends.port", Message: "a selector without a port", Expected: "the port the selected pods serve on"})
		}
		return errs
	}
	if b.Port != 0 {
		errs = append(errs, FieldError{Path: "spec.backends.port", Message: "a port beside endpoints", Expected: "a port only with a selector: each endpoint has its own"})
	}
	if b.Namespace != "" {
		errs = append(errs, FieldError{Path: "spec.backends.namespace", Message: "a namespace beside endpoints", Expected: "a namespace only with a selector"})
	}
	seen := map[netip.AddrPort]int{}
	// An endpoint has no protocol of its own (it serves the VIP's), so one
	// at the VIP's address and port is the VIP: the slots it held would
	// send connections back where they came from, not to a backend.
	vip, proto, vipErr := r.Spec.VIPAddr()
	for i, e := range b.Endpoints {
		path := fmt.Sprintf("spec.backends.endpoints.%d", i)
		ap, err := parseIPv4Port(e)
		if err != nil {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("invalid endpoint %q: %v", e, err),
				Expected: "an IPv4 address and a port from 1 to 65535, like 127.0.0.1:9001"})
			continue
		}
		if vipErr == nil && ap == vip {
			errs = append(errs, FieldError{Path: path, Message: fmt.Sprintf("endpoint %s is the RouteGroup's own VIP %s/%s (spec.vip): its share of the connections would come back to the VIP", e, vip, proto),
				Expected: "a backend's address and port, other than the VIP's"})
			continue
		}
		if j, dup := seen[ap]; dup {
			msg := "a second endpoint " + e
			if e != ap.String() {
				msg = e + " is a second endpoint " + ap.String()
			}
			errs = append(errs, FieldError{Path: path, Message: msg,
				Expected: "each endpoint once", Related: fmt.Sprintf("spec.backends.endpoints.%d", j)})
			continue
		}
		seen[ap] = i
	}
	return errs
}
