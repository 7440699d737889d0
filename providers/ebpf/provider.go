//go:build linux

// Package ebpf is the eBPF provider: the node agent that runs each
// RouteGroup's 200 ms loop. It loads the connect4 dataplane into a
// cgroup, and per group scrapes the backends' own metrics and the
// program's counters, runs the pure field of engine/decide/routegroup,
// writes the table and flips it (when the group's table enforcement says
// so), and reports the field to Read, the counters to Signals and regime
// changes to Events. The engine plans and gates only the group's config.
package ebpf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/setpoint-dev/setpoint/bpf/dataplane"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/route"
	"github.com/setpoint-dev/setpoint/providers/samplebuf"
	"github.com/setpoint-dev/setpoint/providers/sdk"
)

// Name is the provider's name in an Environment.
const Name = "ebpf"

// Config is the provider's block in the Environment.
type Config struct {
	// Cgroup is the cgroup2 directory whose connects the program sees.
	Cgroup string `json:"cgroup"`
	// PinDir, in a bpffs, keeps the program attached with its tables
	// across the agent's crash (the failsafe takes over) and lets a
	// restarted agent resume. Empty: the program goes with the agent.
	PinDir string `json:"pinDir,omitempty"`
	// Groups and Slots size the maps: how many route groups, how large a
	// table.
	Groups int `json:"groups,omitempty"`
	Slots  int `json:"slots,omitempty"`
	// Allow lists the prefixes VIPs and backends may be in.
	Allow []string `json:"allow,omitempty"`
}

// Defaults.
const (
	DefaultGroups = 8
	DefaultSlots  = 65537
)

// The signals buffer's bounds: a few groups of a thousand backends each,
// with their churn, and about 24 MB of samples waiting for a reader.
const (
	maxSeries  = 64 << 10
	maxSamples = 1 << 20
)

// recordEvery is how often a group's series are sampled.
const recordEvery = time.Second

// DefaultAllow is loopback only: anything wider is the operator's choice.
var DefaultAllow = []string{"127.0.0.0/8"}

// The scrape client's bounds: a backend's response headers (Go's default
// is 10 MiB, and a tick runs scrapeParallel scrapes a group at once), and
// how long idle connections to backends are kept (a backend dropped from
// every config would otherwise keep them for the agent's life).
const (
	maxHeaderBytes  = 64 << 10
	idleConnTimeout = 90 * time.Second
	maxIdleConns    = 2 * scrapeParallel * DefaultGroups
)

// clearGroup is dataplane.ClearGroup (a test makes it fail).
var clearGroup = (*dataplane.Dataplane).ClearGroup

// resumedGroup is a group a pinned dataplane routed a VIP through before
// this agent started, and the config it was routed for (zero when the
// pins recorded none).
type resumedGroup struct {
	idx   uint32
	owner addrs.Object
}

// Provider is the eBPF node agent.
type Provider struct {
	sdk.Base
	// applyMu makes Apply and Shutdown one at a time: a group's start,
	// reconfiguration or stop runs whole.
	applyMu sync.Mutex
	mu      sync.Mutex
	cfg     Config
	// configured: Configure checked the node; the dataplane is loaded only
	// by the first Apply that starts a group, so a plan (which never
	// applies) neither takes over a pinned dataplane nor detaches it.
	configured bool
	closed     bool
	allow      []netip.Prefix
	dp         *dataplane.Dataplane
	// resumed are the VIPs a pinned dataplane routed before this agent
	// started, by VIP and protocol; their groups are reserved until a
	// config for the same VIP claims them, or the config they were routed
	// for is released or names another VIP.
	resumed map[dataplane.VIP]resumedGroup
	// owners records beside the pins which config each group runs for.
	owners *owners
	groups map[addrs.Object]*group
	used   []bool
	buf    *samplebuf.Buffer
	events chan providers.Event
	client *http.Client
	// Clock is the loops' time (the wall, unless a test sets it).
	Clock func() time.Time
	log   *slog.Logger
}

// New returns an unconfigured provider.
func New() *Provider {
	return &Provider{
		groups: map[addrs.Object]*group{},
		buf:    samplebuf.NewBounded(maxSeries, maxSamples),
		events: make(chan providers.Event, 256),
		// A backend's redirect must not send the root agent elsewhere.
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, MaxIdleConns: maxIdleConns,
			IdleConnTimeout: idleConnTimeout, MaxResponseHeaderBytes: maxHeaderBytes},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Clock: time.Now,
		log:   slog.Default().With("provider", Name),
	}
}

// Schema says what the provider serves.
func (p *Provider) Schema(context.Context) (providers.Schema, []providers.Diagnostic) {
	return providers.Schema{Name: Name, Version: "1", Signals: true, Events: true, Kinds: []providers.KindSchema{route.KindSchema()}}, nil
}

func errDiag(format string, a ...any) []providers.Diagnostic {
	return []providers.Diagnostic{{Severity: providers.Error, Message: fmt.Sprintf(format, a...)}}
}

// Configure checks the node: root, a cgroup2 directory, and a kernel that
// loads the program (BPF with BTF). Nothing is attached until an Apply.
func (p *Provider) Configure(_ context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	var c Config
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &c); err != nil {
			return errDiag("ebpf provider config: %v", err)
		}
	}
	if c.Groups == 0 {
		c.Groups = DefaultGroups
	}
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if len(c.Allow) == 0 {
		c.Allow = DefaultAllow
	}
	allow := make([]netip.Prefix, 0, len(c.Allow))
	for _, a := range c.Allow {
		pfx, err := netip.ParsePrefix(a)
		if err != nil || !pfx.Addr().Is4() {
			return errDiag("ebpf provider config: allow %q: want an IPv4 prefix such as 127.0.0.0/8", a)
		}
		allow = append(allow, pfx.Masked())
	}
	if os.Geteuid() != 0 {
		return errDiag("the ebpf provider must run as root: loading BPF programs and attaching them to a cgroup needs CAP_BPF and CAP_NET_ADMIN")
	}
	if c.Cgroup == "" {
		return errDiag("ebpf provider config: cgroup is required: the cgroup2 directory whose connects are routed (e.g. /sys/fs/cgroup)")
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(c.Cgroup, &fs); err != nil {
		return errDiag("ebpf provider config: cgroup %s: %v", c.Cgroup, err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return errDiag("ebpf provider config: %s is not a cgroup2 directory", c.Cgroup)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.configured {
		if equalConfig(p.cfg, c) {
			return nil
		}
		return errDiag("the ebpf provider is already configured with another dataplane: restart it to change cgroup, pinDir, groups or slots")
	}
	// The program and maps this config sizes must load here; unpinned,
	// the probe touches nothing another agent holds.
	probe, err := dataplane.Load(dataplane.Options{Groups: c.Groups, Slots: c.Slots})
	if err != nil {
		return errDiag("%v", err)
	}
	probe.Close()
	p.cfg, p.allow, p.used, p.configured = c, allow, make([]bool, c.Groups), true
	p.resumed = map[dataplane.VIP]resumedGroup{}
	return nil
}

// ensure loads and attaches the dataplane, taking over a pinned one (and
// reserving the groups of the VIPs it routes). Called with applyMu held.
func (p *Provider) ensure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dp != nil {
		return nil
	}
	c := p.cfg
	dp, err := dataplane.Load(dataplane.Options{Groups: c.Groups, Slots: c.Slots, PinDir: c.PinDir})
	if err != nil {
		return err
	}
	resumed, err := dp.Attach(c.Cgroup)
	if err != nil {
		dp.Close()
		return err
	}
	own, err := openOwners(c.PinDir, c.Groups)
	if err != nil {
		dp.Close()
		return err
	}
	if resumed {
		vips, err := dp.VIPs()
		if err != nil {
			own.close()
			dp.Close()
			return fmt.Errorf("reading the pinned dataplane's VIPs: %w", err)
		}
		for v, g := range vips {
			if int(g) < len(p.used) {
				owner, _, err := own.get(g)
				if err != nil {
					// Reserved all the same, as a VIP of unknown owner is.
					p.log.Warn("a resumed VIP's owner is unreadable", "vip", v.Addr.String(), "group", g, "err", err)
				}
				p.resumed[v] = resumedGroup{idx: g, owner: owner}
				p.used[g] = true
			}
		}
		p.log.Info("resumed a pinned dataplane", "pinDir", c.PinDir, "vips", len(p.resumed))
	}
	p.dp, p.owners = dp, own
	return nil
}

// pinnedLink is where dataplane.Attach pins its link: a crashed agent's
// dataplane is there to resume when it exists.
func pinnedLink(dir string) string { return filepath.Join(dir, "link") }

// Resumed lists the configs a pinned dataplane routed VIPs for before
// this agent started (as recorded beside the pins), taking over the
// dataplane a crashed agent left. A node agent's first pass releases
// those no NodeAgentConfig asks for any more (agentcr.Resumer), so a
// config deleted while no agent ran does not leave its VIP on the
// failsafe. Without a pin directory, or with nothing pinned there,
// nothing survived and nothing is attached.
func (p *Provider) Resumed(context.Context) ([]addrs.Object, error) {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	p.mu.Lock()
	closed, configured, dir, loaded := p.closed, p.configured, p.cfg.PinDir, p.dp != nil
	p.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("the agent is shutting down")
	case !configured:
		return nil, errors.New("not configured")
	case dir == "":
		return nil, nil
	}
	if !loaded {
		if _, err := os.Stat(pinnedLink(dir)); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("looking for a pinned dataplane in %s: %w", dir, err)
		}
		if err := p.ensure(); err != nil {
			return nil, fmt.Errorf("resuming the pinned dataplane in %s: %w", dir, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[addrs.Object]bool{}
	for _, r := range p.resumed {
		if !r.owner.IsZero() {
			seen[r.owner] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b addrs.Object) int { return strings.Compare(a.String(), b.String()) }), nil
}

// dropOwned gives up the resumed VIPs routed for a before this agent
// started, except keep (nil: every one): their entries go, as a release
// removes a running group's, and their indexes are freed. A config
// released, or naming another VIP now, no longer asks for them.
func (p *Provider) dropOwned(a addrs.Object, keep *dataplane.VIP) error {
	p.mu.Lock()
	drop := map[dataplane.VIP]resumedGroup{}
	for v, r := range p.resumed {
		if r.owner == a && (keep == nil || v != *keep) {
			drop[v] = r
		}
	}
	dp := p.dp
	p.mu.Unlock()
	var errs []error
	for v, r := range drop {
		if err := clearGroup(dp, r.idx); err != nil {
			// Still reserved: the next release or apply of a tries again.
			errs = append(errs, fmt.Errorf("removing VIP %s, routed for %s before this agent started: %w", v.Addr, a, err))
			continue
		}
		if err := p.owners.set(r.idx, addrs.Object{}); err != nil {
			// No VIP points at the index any more: a stale owner there is
			// never read, and the index's next user records its own.
			p.log.Warn("clearing a resumed group's owner", "group", r.idx, "err", err)
		}
		p.mu.Lock()
		delete(p.resumed, v)
		p.used[r.idx] = false
		p.mu.Unlock()
		p.log.Info("removed a resumed VIP its config no longer asks for", "vip", v.Addr.String(), "group", r.idx, "config", a.String())
	}
	return errors.Join(errs...)
}

func equalConfig(a, b Config) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func (p *Provider) allowed(a netip.Addr) bool {
	for _, pfx := range p.allow {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// check parses a change's config and says whether this agent may run it.
func (p *Provider) check(c providers.ObjectChange) (route.Config, values.Value, error) {
	if c.Address.Kind != route.Kind {
		return route.Config{}, values.Value{}, fmt.Errorf("the ebpf provider serves %s objects, not %s", route.Kind, c.Address.Kind)
	}
	if len(c.Restored) > 0 {
		// A route group's config is setpoint's own: no user's value.
		return route.Config{}, values.Value{}, fmt.Errorf("%s: the ebpf provider has no user's value to restore", c.Address)
	}
	v, ok := c.Attributes[route.AttrConfig]
	if !ok || v.Type() != values.Structured {
		return route.Config{}, values.Value{}, fmt.Errorf("%s: no config attribute", c.Address)
	}
	conf, err := route.Parse(v.JSON())
	if err != nil {
		return route.Config{}, values.Value{}, err
	}
	if conf.Params.Slots > p.cfg.Slots {
		return route.Config{}, values.Value{}, fmt.Errorf("table of %d slots: this agent's maps hold at most %d (its config's slots)", conf.Params.Slots, p.cfg.Slots)
	}
	if conf.Proto != "tcp" {
		// connect4 sees connect() only: a UDP client's sendto() would pass
		// the table by, and half a route group is worse than none.
		return route.Config{}, values.Value{}, fmt.Errorf("protocol %s: this agent routes TCP only (the dataplane hooks connect(), which unconnected UDP sockets never call)", conf.Proto)
	}
	vip := netip.MustParseAddrPort(conf.VIP)
	if !vip.Addr().Is4() || !p.allowed(vip.Addr()) {
		return route.Config{}, values.Value{}, fmt.Errorf("VIP %s is outside what this agent may route (%v)", vip, p.cfg.Allow)
	}
	for _, e := range conf.Endpoints {
		ap := netip.MustParseAddrPort(e)
		if !ap.Addr().Is4() || !p.allowed(ap.Addr()) {
			return route.Config{}, values.Value{}, fmt.Errorf("backend %s is outside what this agent may route to (%v)", e, p.cfg.Allow)
		}
	}
	// Compared parsed: "127.100.0.1:08080" is the same VIP as ":8080".
	key := vipKey(conf)
	for a, g := range p.groups {
		if a != c.Address && vipKey(g.conf) == key {
			return route.Config{}, values.Value{}, fmt.Errorf("VIP %s/%s is already routed by %s", conf.VIP, conf.Proto, a)
		}
	}
	return conf, v, nil
}

// PlanChange says whether each change would be accepted.
func (p *Provider) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		out.Results[i] = providers.ObjectResult{Address: c.Address}
		if !p.configured {
			out.Results[i].Err = "not configured"
			continue
		}
		if c.Action == action.Delete || released(c) {
			a := c.Address
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a,
				Message: fmt.Sprintf("releasing %s's config stops the route group on this node: its loop ends and its VIP is no longer rewritten (connects to it go where they would without setpoint)", a)})
			continue
		}
		conf, _, err := p.check(c)
		if err != nil {
			out.Results[i].Err = err.Error()
			continue
		}
		if p.free(c.Address, vipKey(conf)) < 0 {
			out.Results[i].Err = fmt.Sprintf("every one of the agent's %d groups is in use", p.cfg.Groups)
			continue
		}
		out.Results[i].After = map[addrs.Path]values.Value{route.AttrConfig: c.Attributes[route.AttrConfig]}
	}
	return out
}

// free is the group index a config at a for VIP key would take: its own
// if it runs, the one reserved for key since a resume, else the first
// unused; or −1.
func (p *Provider) free(a addrs.Object, key dataplane.VIP) int {
	if g, ok := p.groups[a]; ok {
		return int(g.idx)
	}
	if r, ok := p.resumed[key]; ok {
		return int(r.idx)
	}
	for i, u := range p.used {
		if !u {
			return i
		}
	}
	return -1
}

// Apply starts, reconfigures or stops groups.
func (p *Provider) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	out := providers.ApplyResponse{Results: make([]providers.ObjectResult, len(req.Changes))}
	for i, c := range req.Changes {
		out.Results[i] = providers.ObjectResult{Address: c.Address}
		if err := p.apply(c); err != nil {
			out.Results[i].Err = err.Error()
			continue
		}
		if c.Action != action.Delete && !released(c) {
			out.Results[i].After = map[addrs.Path]values.Value{route.AttrConfig: c.Attributes[route.AttrConfig]}
		}
	}
	return out
}

func (p *Provider) apply(c providers.ObjectChange) error {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return errors.New("the agent is shutting down")
	case !p.configured:
		p.mu.Unlock()
		return errors.New("not configured")
	}
	old := p.groups[c.Address]
	if c.Action == action.Delete || released(c) {
		// A deleted spec releases its config: the loop stops and the VIP
		// goes back to whatever routed it before setpoint. The VIP entry
		// is setpoint's own, not a user's value, so it goes whether this
		// agent runs the group or resumed it from a crashed one's pins.
		p.mu.Unlock()
		var errs []error
		if old != nil {
			errs = append(errs, p.stop(old))
		}
		errs = append(errs, p.dropOwned(c.Address, nil))
		return errors.Join(errs...)
	}
	conf, raw, err := p.check(c)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	p.mu.Unlock()
	key := vipKey(conf)
	// Before the early return below, so a failed removal is retried by
	// the same config applied again.
	if err := p.dropOwned(c.Address, &key); err != nil {
		return err
	}
	p.mu.Lock()
	if old != nil && old.raw.Equal(raw) && old.running() {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	if err := p.ensure(); err != nil {
		return err
	}
	p.mu.Lock()
	g := newGroup(p, c.Address, 0, conf, raw)
	g.manager = c.Manager
	if g.manager == "" {
		g.manager = gate.SetpointManager
	}
	res, resumed := p.resumed[key]
	resumedIdx := res.idx
	// Its own index if it runs, else the one reserved for its VIP since
	// the resume, else a free one.
	idx := p.free(c.Address, key)
	if idx < 0 {
		p.mu.Unlock()
		return fmt.Errorf("every one of the agent's %d groups is in use", p.cfg.Groups)
	}
	if old == nil {
		// Recorded before anything routes through the index, so a crash
		// from here on leaves its VIP with the config it is routed for.
		if err := p.owners.set(uint32(idx), c.Address); err != nil {
			p.mu.Unlock()
			return err
		}
	}
	p.used[idx] = true
	g.idx = uint32(idx)
	p.groups[c.Address] = g
	delete(p.resumed, key)
	p.mu.Unlock()
	switch {
	case old != nil:
		// A new config takes over the old one's table and state, so its
		// first step is bounded by Δmax from what the kernel has.
		old.halt()
		g.inherit(old)
		if resumed && resumedIdx != g.idx {
			// It moved to a VIP a resumed group routes: that group is given
			// up (its VIP entry goes with it; this group's next tick points
			// the VIP at its own index) and its index freed.
			if err := clearGroup(g.dp, resumedIdx); err != nil {
				p.log.Warn("clearing a resumed group", "group", resumedIdx, "err", err)
				p.mu.Lock()
				p.resumed[key] = res
				p.mu.Unlock()
			} else {
				if err := p.owners.set(resumedIdx, addrs.Object{}); err != nil {
					p.log.Warn("clearing a resumed group's owner", "group", resumedIdx, "err", err)
				}
				p.mu.Lock()
				p.used[resumedIdx] = false
				p.mu.Unlock()
			}
		}
	case resumed:
		if err := g.resume(); err != nil {
			p.log.Warn("resuming a pinned group", "group", c.Address.String(), "err", err)
		}
	default:
		if err := clearGroup(g.dp, uint32(idx)); err != nil {
			// Nothing runs: nothing is registered either, so Read does not
			// report the config and a retry applies it again.
			p.mu.Lock()
			delete(p.groups, c.Address)
			p.used[idx] = false
			p.mu.Unlock()
			return fmt.Errorf("clearing group %d: %w", idx, err)
		}
	}
	g.start()
	return nil
}

func vipKey(conf route.Config) dataplane.VIP {
	proto := uint32(dataplane.TCP)
	if conf.Proto == "udp" {
		proto = dataplane.UDP
	}
	return dataplane.VIP{Addr: netip.MustParseAddrPort(conf.VIP), Proto: proto}
}

// released says the change gives up the config without a new one.
func released(c providers.ObjectChange) bool {
	if _, ok := c.Attributes[route.AttrConfig]; ok || len(c.Restored) > 0 {
		return false
	}
	for _, p := range c.Released {
		if p == route.AttrConfig {
			return true
		}
	}
	return false
}

// stop ends a group's loop and its routing, and lets go of the group. If
// the routing cannot be removed, the halted group stays registered (Read
// still reports it, its index stays taken) so the release is retried.
func (p *Provider) stop(g *group) error {
	g.halt()
	if err := g.uninstall(); err != nil {
		return err
	}
	if err := p.owners.set(g.idx, addrs.Object{}); err != nil {
		// Its VIP is gone: a stale owner of an index no VIP points at is
		// never read, and the index's next user records its own.
		p.log.Warn("clearing a released group's owner", "group", g.idx, "err", err)
	}
	p.mu.Lock()
	if p.groups[g.addr] == g {
		delete(p.groups, g.addr)
	}
	p.used[g.idx] = false
	p.mu.Unlock()
	return nil
}

// Read reports each group's config and last tick.
func (p *Provider) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	out := providers.ReadResponse{Objects: make([]providers.Object, len(req.Addresses))}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, a := range req.Addresses {
		out.Objects[i] = providers.Object{Address: a}
		if g, ok := p.groups[a]; ok {
			out.Objects[i].Exists = true
			out.Objects[i].Attributes = g.observed()
			out.Objects[i].Managers = map[addrs.Path]string{route.AttrConfig: g.manager}
		}
	}
	for _, g := range p.groups {
		if why := g.failing(); why != "" {
			a := g.addr
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a, Message: why})
		}
	}
	for v, r := range p.resumed {
		owner := ""
		if !r.owner.IsZero() {
			owner = " for " + r.owner.String()
		}
		out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning,
			Message: fmt.Sprintf("VIP %s (group %d) was routed by the pinned dataplane before this agent started%s, and no config claims it: its failsafe splits it evenly; apply its RouteGroup, or run `setpoint provider cleanup ebpf`", v.Addr, r.idx, owner)})
	}
	if !p.configured {
		out.Diagnostics = errDiag("not configured")
	}
	return out
}

// Signals hands over the loops' samples.
func (p *Provider) Signals(_ context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	return p.buf.Take(req)
}

// Events sends regime changes and scale hints until ctx ends.
func (p *Provider) Events(ctx context.Context, _ time.Time, send func(providers.Event) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-p.events:
			if err := send(e); err != nil {
				return err
			}
		}
	}
}

func (p *Provider) emit(e providers.Event) {
	select {
	case p.events <- e:
	default:
		// Nobody is listening fast enough: a reconcile re-reads anyway.
	}
}

// Shutdown stops every loop, removes their VIPs and detaches the program,
// pins and all: a clean exit leaves nothing behind. A crash skips this,
// and a pinned program's failsafe takes over.
func (p *Provider) Shutdown() error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	p.mu.Lock()
	p.closed = true
	groups := make([]*group, 0, len(p.groups))
	for _, g := range p.groups {
		groups = append(groups, g)
	}
	p.groups = map[addrs.Object]*group{}
	dp := p.dp
	p.mu.Unlock()
	var errs []error
	for _, g := range groups {
		g.halt()
		errs = append(errs, g.uninstall())
	}
	p.mu.Lock()
	own := p.owners
	p.dp, p.owners = nil, nil
	p.mu.Unlock()
	if dp != nil {
		// The owners map first: the dataplane's cleanup removes the pin
		// directory, which must be empty by then.
		errs = append(errs, own.remove(), dp.Cleanup())
	}
	return errors.Join(errs...)
}

// Leave stops every loop and lets go of the dataplane without detaching
// it: with a pin directory the program stays attached with its last
// tables, its failsafe takes over when the heartbeat goes stale, and the
// next agent resumes it. A DaemonSet's agent leaves this way on SIGTERM,
// so a rolling update never leaves the VIPs unrouted; without pins the
// program goes with the process.
func (p *Provider) Leave() error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	p.mu.Lock()
	p.closed = true
	groups := slices.Collect(maps.Values(p.groups))
	p.groups = map[addrs.Object]*group{}
	dp := p.dp
	p.mu.Unlock()
	// The loops first: none writes to a dataplane let go of.
	for _, g := range groups {
		g.halt()
	}
	p.mu.Lock()
	own := p.owners
	p.dp, p.owners = nil, nil
	p.mu.Unlock()
	if dp == nil {
		return nil
	}
	return errors.Join(own.close(), dp.Close())
}

// Cleanup removes a pinned dataplane a crashed agent left at pinDir: the
// explicit way to detach it.
func Cleanup(pinDir string, groups, slots int) error {
	dp, err := dataplane.Load(dataplane.Options{Groups: groups, Slots: slots, PinDir: pinDir})
	if err != nil {
		return err
	}
	if _, err := dp.Attach(""); err != nil {
		dp.Close()
		return fmt.Errorf("no pinned link at %s: %w", pinDir, err)
	}
	// Under the dataplane's lock, and before its cleanup removes the
	// directory, which must be empty by then.
	if err := removeOwnersPin(pinDir); err != nil {
		dp.Close()
		return err
	}
	return dp.Cleanup()
}
