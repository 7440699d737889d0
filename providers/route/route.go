// Package route is the vocabulary the RouteGroup kind and the providers
// that run its loop (eBPF, sim) share: the object's kind, its attributes,
// and the configuration the engine plans, gates and applies. The fast
// loop itself runs in the provider; the engine only moves this config.
package route

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
)

// Kind is the object a RouteGroup's provider serves.
const Kind = "RouteGroup"

// Attributes of a RouteGroup object. Config is the one setpoint writes;
// the others are what the loop observed at its last tick (read-only).
var (
	AttrConfig    = addrs.MustPath("config")
	AttrRegime    = addrs.MustPath("status.regime")
	AttrAdmission = addrs.MustPath("status.admission")
	AttrSkew      = addrs.MustPath("status.skew")
	AttrEpoch     = addrs.MustPath("status.epoch")
	AttrTick      = addrs.MustPath("status.tick")
	AttrField     = addrs.MustPath("status.field") // structured: names, weights, slots, pressure
)

// KindSchema is the RouteGroup kind as a provider serving it lists it in
// its Schema.
func KindSchema() providers.KindSchema {
	return providers.KindSchema{Kind: Kind, Attributes: []providers.AttributeSchema{
		{Path: AttrConfig, Type: values.Structured, Description: "the route group's configuration"},
		{Path: AttrRegime, Type: values.String, ReadOnly: true, Description: "laminar, transition, crisis or recovery"},
		{Path: AttrAdmission, Type: values.String, ReadOnly: true, Description: "normal, soft or hard"},
		{Path: AttrSkew, Type: values.String, ReadOnly: true, Description: "observed split against the weights"},
		{Path: AttrEpoch, Type: values.Count, ReadOnly: true, Description: "table flips"},
		{Path: AttrTick, Type: values.Count, ReadOnly: true, Description: "ticks run"},
		{Path: AttrField, Type: values.Structured, ReadOnly: true, Description: "weights, slots and pressure by backend"},
	}}
}

// Table enforcement as the config carries it.
const (
	TableObserve = "observe" // compute and report the field; write no table
	TableEnforce = "enforce"
)

// Metrics says how a backend's own Prometheus endpoint is read.
type Metrics struct {
	Path      string `json:"path"`
	Port      int    `json:"port,omitempty"`
	Queue     string `json:"queue"`
	Latency   string `json:"latency"`
	ErrorRate string `json:"errorRate"`
}

// Config is one route group's configuration.
type Config struct {
	VIP       string            `json:"vip"`   // IPv4:port
	Proto     string            `json:"proto"` // tcp | udp
	Endpoints []string          `json:"endpoints"`
	Metrics   Metrics           `json:"metrics"`
	Builder   string            `json:"builder"`
	Every     time.Duration     `json:"everyNanos"`
	Jitter    float64           `json:"jitter"`
	Params    routegroup.Params `json:"params"`
	Burst     int               `json:"burst,omitempty"`
	Failsafe  time.Duration     `json:"failsafeNanos"`
	Table     string            `json:"table"`
}

// Parse reads a config attribute's JSON and checks what the loop relies
// on, so a provider refuses a config it cannot run.
func Parse(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("route group config: %w", err)
	}
	return c, c.Check()
}

// Check says what is wrong with a config.
func (c Config) Check() error {
	if _, err := netip.ParseAddrPort(c.VIP); err != nil {
		return fmt.Errorf("VIP %q: %w", c.VIP, err)
	}
	if c.Proto != "tcp" && c.Proto != "udp" {
		return fmt.Errorf("protocol %q: want tcp or udp", c.Proto)
	}
	if len(c.Endpoints) == 0 {
		return fmt.Errorf("no backends: a route group needs at least one")
	}
	if len(c.Endpoints) > routegroup.MaxBackends {
		return fmt.Errorf("%d backends: at most %d", len(c.Endpoints), routegroup.MaxBackends)
	}
	// Each backend once: two spellings of one address (a port with a
	// leading 0) would be two names for one backend, with two shares of
	// the table. (The same endpoint written twice alike is one name.)
	named := make(map[netip.AddrPort]string, len(c.Endpoints))
	for _, e := range c.Endpoints {
		ap, err := netip.ParseAddrPort(e)
		if err != nil {
			return fmt.Errorf("backend %q: %w", e, err)
		}
		if ap.Port() == 0 {
			return fmt.Errorf("backend %q: port 0 is no port", e)
		}
		if prev, dup := named[ap]; dup && prev != e {
			return fmt.Errorf("backend %s is %s again: name each backend once", e, prev)
		}
		named[ap] = e
	}
	if !routegroup.IsPrime(c.Params.Slots) {
		return fmt.Errorf("table of %d slots: the size must be prime", c.Params.Slots)
	}
	if err := c.Params.Validate(); err != nil {
		return err
	}
	if c.Builder != routegroup.BuildMaglev && c.Builder != routegroup.BuildReplicate {
		return fmt.Errorf("table builder %q: want maglev or replicate", c.Builder)
	}
	if c.Every < 10*time.Millisecond || c.Every > 10*time.Second || c.Jitter < 0 || c.Jitter > 0.5 {
		return fmt.Errorf("tick every %s jitter %g: want 10ms..10s and 0..0.5", c.Every, c.Jitter)
	}
	if least := routegroup.MinFailsafe(c.Every, c.Jitter); c.Failsafe < least {
		return fmt.Errorf("failsafe after %s: want at least %s (a jittered tick, a full scrape and one tick more)", c.Failsafe, least)
	}
	if c.Burst < 0 || c.Burst > routegroup.MaxBurst {
		return fmt.Errorf("admission burst %d: want 0..%d", c.Burst, routegroup.MaxBurst)
	}
	if c.Metrics.Port < 0 || c.Metrics.Port > 65535 {
		return fmt.Errorf("metrics port %d: want 1..65535 (or 0: the backend's own port)", c.Metrics.Port)
	}
	if c.Table != TableObserve && c.Table != TableEnforce {
		return fmt.Errorf("table enforcement %q: want observe or enforce", c.Table)
	}
	if c.Metrics.Path == "" || c.Metrics.Path[0] != '/' {
		return fmt.Errorf("metrics path %q: want an absolute path", c.Metrics.Path)
	}
	return nil
}

// Field is what a provider reports of a group's last tick.
type Field struct {
	Names    []string  `json:"names"`
	Weights  []float64 `json:"weights"`
	Slots    []int     `json:"slots"`
	Pressure []float64 `json:"pressure"`
	Flagged  []string  `json:"flagged,omitempty"`
	Churn    float64   `json:"churn"`
}

// Sorted returns the endpoints in order, without repeats.
func (c Config) Sorted() []string {
	out := slices.Clone(c.Endpoints)
	slices.Sort(out)
	return slices.Compact(out)
}
