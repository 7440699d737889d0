package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/internal/atomicfile"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/noderes"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// StateVersion is the sim state file's format: 3 seals the changes with a
// checksum.
const StateVersion = 3

// Change is an object change that took effect, as the sim state file
// keeps it: At is the second of the trace at which it did. Replaying it
// runs the same checks as Apply at the same second, so a replayed world is
// the live one.
type Change struct {
	At         int                         `json:"at"`
	Address    providers.Address           `json:"address"`
	Action     action.Action               `json:"action"`
	Attributes map[addrs.Path]values.Value `json:"attributes,omitempty"`
	Changed    []addrs.Path                `json:"changed,omitempty"`
	Manager    string                      `json:"manager"`
	Force      bool                        `json:"force,omitempty"`
	Released   []addrs.Path                `json:"released,omitempty"`
	Restored   map[addrs.Path]values.Value `json:"restored,omitempty"`
}

func changeOf(at int, c providers.ObjectChange) Change {
	return Change{At: at, Address: c.Address, Action: c.Action, Attributes: maps.Clone(c.Attributes),
		Changed: slices.Clone(c.Changed), Manager: c.Manager, Force: c.Force, Released: slices.Clone(c.Released), Restored: maps.Clone(c.Restored)}
}

func (c Change) objectChange() providers.ObjectChange {
	return providers.ObjectChange{Address: c.Address, Action: c.Action, Attributes: c.Attributes,
		Changed: c.Changed, Manager: c.Manager, Force: c.Force, Released: c.Released, Restored: c.Restored}
}

// equal reports whether two changes are the same change.
func (c Change) equal(d Change) bool {
	return c.At == d.At && c.Address == d.Address && c.Action == d.Action && c.Manager == d.Manager && c.Force == d.Force &&
		maps.Equal(c.Attributes, d.Attributes) && slices.Equal(c.Changed, d.Changed) && slices.Equal(c.Released, d.Released) &&
		maps.Equal(c.Restored, d.Restored)
}

type stateFile struct {
	Version int `json:"version"`
	// Checksum is the SHA-256 of the changes' canonical JSON (compact, as
	// encoding/json writes them): a file edited or damaged so that it
	// still parses is refused rather than replayed.
	Checksum string            `json:"checksum"`
	Changes  []json.RawMessage `json:"changes"`
}

// checksum seals changes: the hex SHA-256 of their canonical JSON.
func checksum(changes []Change) (string, error) {
	if changes == nil {
		changes = []Change{}
	}
	b, err := json.Marshal(changes)
	if err != nil {
		return "", fmt.Errorf("sealing the sim state: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// maxChangeAt bounds a change's second: no trace is longer.
var maxChangeAt = int(DefaultMaxTraceDuration / time.Second)

// LoadChanges reads the sim state file; a missing file is an empty world.
func LoadChanges(path string) ([]Change, error) {
	changes, _, err := readState(path)
	return changes, err
}

// LastChangeAt is the virtual time of the last change the sim state file
// at path records (zero when there is none): the latest any process
// applied, which a later process starts from so it sees what was applied.
func LastChangeAt(path string, tr *Trace) (time.Time, error) {
	changes, err := LoadChanges(path)
	if err != nil || len(changes) == 0 {
		return time.Time{}, err
	}
	// In order: the file is refused otherwise.
	return tr.Start.Add(time.Duration(changes[len(changes)-1].At) * time.Second), nil
}

// parseChanges reads the content of the sim state file at path (named in
// errors): its version, every change, each checked on its own and in
// order, and the checksum over them.
func parseChanges(path string, b []byte) ([]Change, error) {
	changes, sealed, err := decodeState(path, b)
	if err != nil {
		return nil, err
	}
	if sealed == "" {
		return nil, corrupt(path, "it has no checksum")
	}
	sum, err := checksum(changes)
	if err != nil {
		return nil, err
	}
	if sum != sealed {
		return nil, corrupt(path, "its checksum does not match its changes (edited, or damaged)")
	}
	if len(changes) == 0 {
		return nil, nil
	}
	return changes, nil
}

// corrupt says what is wrong with the state file at path, and what to do.
// The detail is cut short: it may quote a value of any length.
func corrupt(path, detail string) error {
	detail = diag.Cut(detail, 300)
	return fmt.Errorf("sim state %s is corrupt: %s; it is a cache of the changes applied to the sim world: delete it and the world starts again from its config", path, detail)
}

// decodeState reads the state file's content up to its seal: the version,
// the changes, each checked on its own and in order, and the checksum as
// stored (not checked).
func decodeState(path string, b []byte) (changes []Change, sealed string, err error) {
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", corrupt(path, err.Error())
	}
	if v.Version != StateVersion {
		return nil, "", fmt.Errorf("sim state %s is version %d and this release reads only %d: the file is a cache of the changes applied to the sim world, delete it and the world starts again from its config", path, v.Version, StateVersion)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, "", corrupt(path, err.Error())
	}
	changes = make([]Change, 0, len(st.Changes))
	for i, raw := range st.Changes {
		c, err := decodeChange(raw)
		if err == nil {
			err = c.check()
		}
		if err == nil && i > 0 && c.At < changes[i-1].At {
			err = fmt.Errorf("at %d s is before the change before it (%d s)", c.At, changes[i-1].At)
		}
		if err != nil {
			return nil, "", corrupt(path, fmt.Sprintf("change %d: %v", i+1, err))
		}
		changes = append(changes, c)
	}
	return changes, st.Checksum, nil
}

// decodeChange reads one change, telling a field that is absent from one
// at its zero value where the zero value is not a valid change.
func decodeChange(raw json.RawMessage) (Change, error) {
	var w struct {
		At         *int                           `json:"at"`
		Address    *string                        `json:"address"`
		Action     *action.Action                 `json:"action"`
		Attributes map[addrs.Path]json.RawMessage `json:"attributes"`
		Change
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return Change{}, err
	}
	c := w.Change
	if len(w.Attributes) > 0 {
		c.Attributes = make(map[addrs.Path]values.Value, len(w.Attributes))
	}
	// Each value on its own, so an error names its attribute.
	for _, p := range slices.SortedFunc(maps.Keys(w.Attributes), comparePaths) {
		var v values.Value
		if err := json.Unmarshal(w.Attributes[p], &v); err != nil {
			return c, fmt.Errorf("%s: %w", p, err)
		}
		c.Attributes[p] = v
	}
	switch {
	case w.At == nil:
		return c, errors.New("no time (at)")
	case w.Address == nil:
		return c, errors.New("no address")
	case w.Action == nil:
		return c, errors.New("no action")
	}
	a, err := providers.ParseAddress(*w.Address)
	if err != nil {
		return c, err
	}
	c.At, c.Address, c.Action = *w.At, a, *w.Action
	return c, nil
}

// check is what every change the sim world records satisfies, whatever
// the world: a time within the longest trace, an object of the kinds it
// serves, a manager, and typed, non-negative values for what it changed.
func (c Change) check() error {
	switch {
	case c.At < 0:
		return fmt.Errorf("at %d s is before the trace's start", c.At)
	case c.At > maxChangeAt:
		return fmt.Errorf("at %d s is past the longest trace (%s)", c.At, span(DefaultMaxTraceDuration))
	case c.Manager == "":
		return errors.New("no manager")
	case c.Address.Namespace == "":
		return fmt.Errorf("%s: the sim world's objects are namespaced", c.Address)
	}
	switch c.Address.Kind {
	case KindDeployment, KindHPA, KindKnative, KindCluster, KindRouteGroup, KindNodePolicy:
	default:
		return fmt.Errorf("%s: the sim world has no kind %s", c.Address, c.Address.Kind)
	}
	switch c.Action {
	case action.NoOp, action.Create, action.Update, action.Delete:
	default:
		return fmt.Errorf("unknown action %s", c.Action)
	}
	for _, p := range slices.SortedFunc(maps.Keys(c.Attributes), comparePaths) {
		v := c.Attributes[p]
		switch {
		case p.String() == "":
			return errors.New("an attribute without a path")
		case !v.IsValid():
			return fmt.Errorf("%s: no value", p)
		case c.Address.Kind == KindRouteGroup:
			// A route group's one attribute, its config, parsed when the
			// change is replayed.
			if p != route.AttrConfig || v.Type() != values.Structured {
				return fmt.Errorf("%s: a route group has only its structured %s", p, route.AttrConfig)
			}
		case c.Address.Kind == KindNodePolicy:
			if p != noderes.AttrConfig || v.Type() != values.Structured {
				return fmt.Errorf("%s: a node policy has only its structured %s", p, noderes.AttrConfig)
			}
		case v.Type() == values.String && c.Address.Kind == KindCluster:
			// A cluster's template and labels.
		case v.Type() != values.Count && v.Type() != values.Bytes:
			return fmt.Errorf("%s: the sim world has no attribute of type %s", p, v.Type())
		case v.Int() < 0:
			return fmt.Errorf("%s: %s is negative", p, v)
		}
	}
	for _, p := range c.Changed {
		if _, ok := c.Attributes[p]; !ok {
			return fmt.Errorf("%s is marked changed but has no value", p)
		}
	}
	for _, p := range c.Released {
		if _, ok := c.Attributes[p]; ok || p.String() == "" {
			return fmt.Errorf("released %q is set too, or has no path", p)
		}
	}
	if err := c.objectChange().CheckRestored(); err != nil {
		return err
	}
	for p, v := range c.Restored {
		if v.Type() != values.Count && v.Type() != values.Bytes || v.Int() < 0 {
			return fmt.Errorf("restored %s: the sim world restores only a count or a size, not the %s %s", p, v.Type(), v)
		}
	}
	return nil
}

// encodeChanges is the state file's content for changes.
func encodeChanges(changes []Change) ([]byte, error) {
	sum, err := checksum(changes)
	if err != nil {
		return nil, err
	}
	if changes == nil {
		changes = []Change{}
	}
	b, err := json.MarshalIndent(struct {
		Version  int      `json:"version"`
		Checksum string   `json:"checksum"`
		Changes  []Change `json:"changes"`
	}{StateVersion, sum, changes}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("writing sim state: %w", err)
	}
	return b, nil
}

// saveChanges writes the state file atomically: a crash leaves the old file
// or the new one, never half of one.
func saveChanges(path string, changes []Change) error {
	b, err := encodeChanges(changes)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing sim state: %w", err)
	}
	return atomicfile.Write(path, b, 0o644)
}

// Provider serves the world through the provider interface. Every request
// first catches up with the state file, which another provider process
// (another setpoint run on the same directory) may have changed, then
// advances the world to the request's now.
type Provider struct {
	World *World
	// StatePath persists applied changes ("" keeps them in memory only).
	StatePath string
	// seen is the state file as this provider last read or wrote it.
	seen fileSeen
}

var _ providers.Provider = (*Provider)(nil)

// NewProvider builds a world over tr with the changes in the state file
// at statePath ("": none, and none kept), and o's sink and report (its
// changes are the state file's).
func NewProvider(cfg spec.SimConfig, tr *Trace, statePath string, o Options) (*Provider, error) {
	p := &Provider{StatePath: statePath}
	var changes []Change
	if statePath != "" {
		var err error
		if changes, p.seen, err = readState(statePath); err != nil {
			return nil, err
		}
	}
	o.Changes = changes
	w, err := NewWithTrace(cfg, tr, o)
	if err != nil {
		if len(changes) > 0 {
			err = fmt.Errorf("sim state %s: %w", statePath, err)
		}
		return nil, err
	}
	p.World = w
	return p, nil
}

func (p *Provider) advance(now time.Time) {
	if !now.IsZero() && now.After(p.World.Now()) {
		p.World.AdvanceTo(now)
	}
}

// stateDiags reports a state file that cannot be caught up with.
func stateDiags(err error) []providers.Diagnostic {
	return []providers.Diagnostic{diag.New("sim state", err.Error())}
}

// Read returns each addressed object as it is now.
func (p *Provider) Read(_ context.Context, req providers.ReadRequest) providers.ReadResponse {
	if err := p.refresh(false); err != nil {
		return providers.ReadResponse{Diagnostics: stateDiags(err)}
	}
	p.advance(req.Now)
	resp := providers.ReadResponse{Objects: make([]providers.Object, 0, len(req.Addresses))}
	for _, a := range req.Addresses {
		if o := p.World.byKey[a.Key()]; o != nil {
			resp.Objects = append(resp.Objects, o.toObject(a, p.World.sec))
		} else if r, ok := p.World.Report(a.Namespace, a.Name); ok && a.Kind == KindReport {
			resp.Objects = append(resp.Objects, reportObject(a, r))
		} else if g := p.World.group(a.Namespace, a.Name); g != nil && a.Kind == KindRouteGroup {
			resp.Objects = append(resp.Objects, g.object(a))
		} else if g != nil && a.Kind == KindRouteReport {
			resp.Objects = append(resp.Objects, routeReportObject(a, g.report()))
		} else if a.Kind == KindNodePolicy {
			resp.Objects = append(resp.Objects, p.World.policyObject(a))
		} else if n := p.World.node(a.Name); n != nil && a.Kind == KindNodeReport {
			resp.Objects = append(resp.Objects, nodeReportObject(a, n.report()))
		} else {
			resp.Objects = append(resp.Objects, providers.Object{Address: a})
		}
	}
	return resp
}

// List returns every object of a kind (in a namespace, when one is given)
// whose labels match the selector, in address order.
func (p *Provider) List(_ context.Context, req providers.ListRequest) providers.ListResponse {
	var resp providers.ListResponse
	if err := p.refresh(false); err != nil {
		resp.Diagnostics = stateDiags(err)
		return resp
	}
	p.advance(req.Now)
	if req.Kind == "" {
		resp.Diagnostics = append(resp.Diagnostics, diag.New("List needs a kind", "the sim world serves Deployment, HorizontalPodAutoscaler and KnativeService"))
		return resp
	}
	prov := req.Provider
	if prov == "" {
		prov = "sim"
	}
	for _, o := range p.World.objectsOf(req.Kind, req.Namespace) {
		if !matches(o.labels, req.Selector) {
			continue
		}
		a := providers.Address{Provider: prov, Kind: o.kind, Namespace: o.namespace, Name: o.name}
		resp.Objects = append(resp.Objects, o.toObject(a, p.World.sec))
	}
	slices.SortFunc(resp.Objects, func(a, b providers.Object) int {
		return strings.Compare(a.Address.String(), b.Address.String())
	})
	return resp
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// PlanChange says what Apply would do with each change, changing nothing.
// Each change is judged against the world as it is, not after the
// changes before it.
func (p *Provider) PlanChange(_ context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	if err := p.refresh(false); err != nil {
		return providers.PlanChangeResponse{Results: failAll(req.Changes, err), Diagnostics: stateDiags(err)}
	}
	p.advance(req.Now)
	if p.World.ended() {
		return providers.PlanChangeResponse{Results: failAll(req.Changes, p.World.errEnded())}
	}
	resp := providers.PlanChangeResponse{Results: make([]providers.ObjectResult, 0, len(req.Changes))}
	for _, c := range req.Changes {
		pend, res := p.World.check(c)
		resp.Results = append(resp.Results, res)
		// What a release stops, said in the plan as the node agents say it.
		a := c.Address
		switch {
		case pend == nil || res.Err != "":
		case pend.route != nil && pend.route.release:
			resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a,
				Message: fmt.Sprintf("releasing %s's config stops the route group: its loop ends and its VIP is no longer steered", a)})
		case pend.policy != nil && pend.policy.release:
			resp.Diagnostics = append(resp.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Address: &a,
				Message: fmt.Sprintf("releasing %s's config stops the node policy: its nodes' containers get every CPU and their own limits back", a)})
		}
	}
	return resp
}

// Apply applies object changes in order; each succeeds or fails whole, and
// the state file records the ones that took effect. With a state file,
// it holds the file's lock from catching up with the file to writing it,
// so two providers on one file never apply to a world the other has
// already moved on from, nor write over each other's changes.
func (p *Provider) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	if p.StatePath != "" {
		unlock, err := lockState(ctx, p.StatePath)
		if err != nil {
			return providers.ApplyResponse{Results: failAll(req.Changes, err), Diagnostics: stateDiags(err)}
		}
		defer unlock()
		if err := p.refresh(true); err != nil {
			return providers.ApplyResponse{Results: failAll(req.Changes, err), Diagnostics: stateDiags(err)}
		}
	}
	p.advance(req.Now)
	if p.World.ended() {
		return providers.ApplyResponse{Results: failAll(req.Changes, p.World.errEnded())}
	}
	resp := providers.ApplyResponse{Results: make([]providers.ObjectResult, 0, len(req.Changes))}
	var recorded []Change
	var took []int // the results of the recorded changes
	for _, c := range req.Changes {
		pend, res := p.World.check(c)
		if pend != nil && p.World.commit(pend) {
			recorded = append(recorded, changeOf(p.World.sec, c))
			took = append(took, len(resp.Results))
		}
		resp.Results = append(resp.Results, res)
	}
	if len(recorded) == 0 {
		return resp
	}
	p.World.record(recorded)
	if p.StatePath == "" {
		return resp
	}
	if err := p.save(); err != nil {
		// What the file does not hold did not happen: the next reader of
		// the file, this provider included, has a world without it.
		for _, i := range took {
			resp.Results[i].Err, resp.Results[i].After = err.Error(), nil
		}
		resp.Diagnostics = append(resp.Diagnostics, stateDiags(err)...)
		// A stamp no read of the file can match: the world is rebuilt
		// from the file, even when there is none yet (a first save that
		// failed), and so loses what the file does not hold.
		p.seen = fileSeen{exists: true}
		if rerr := p.refresh(true); rerr != nil {
			resp.Diagnostics = append(resp.Diagnostics, stateDiags(rerr)...)
		}
	}
	return resp
}

// errEnded refuses a change after the trace's end.
func (w *World) errEnded() error {
	return fmt.Errorf("the trace ended at %s (%s from its start): the sim world takes no changes after it",
		w.End().UTC().Format(time.RFC3339), w.trace.Duration())
}

func failAll(cs []providers.ObjectChange, err error) []providers.ObjectResult {
	out := make([]providers.ObjectResult, len(cs))
	for i, c := range cs {
		out[i] = providers.ObjectResult{Address: c.Address, Err: err.Error()}
	}
	return out
}

// record keeps changes that took effect now, so replays apply them at the
// same second: after every change due by now (those the world has
// applied) and before any due later (another process's world may be
// ahead of this one), which keeps the file in time order.
func (w *World) record(cs []Change) {
	w.changes = slices.Insert(w.changes, w.applied, cs...)
	w.applied += len(cs)
}

// KindReport is the kind of the object through which the world hands out
// a workload's Report (attribute AttrReport, a structured value): sim
// reads it at the end of a run, across the process boundary.
const KindReport = "SimReport"

// AttrReport is the Report of a SimReport object.
var AttrReport = addrs.MustPath("report")

func reportObject(a providers.Address, r Report) providers.Object {
	o := providers.Object{Address: a}
	b, err := json.Marshal(encodePoints(r))
	if err != nil {
		return o
	}
	v, err := values.StructuredOf(b)
	if err != nil {
		return o
	}
	o.Exists = true
	o.Attributes = map[addrs.Path]values.Value{AttrReport: v}
	return o
}

// encodePoints makes a report's points JSON: NaN (no requests) and +Inf
// (everything refused) are not numbers JSON has; they travel as -1 and
// -2, which no latency or rate can be, and DecodeReport turns them back.
func encodePoints(r Report) Report {
	fix := func(xs []float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			switch {
			case math.IsNaN(x):
				out[i] = -1
			case math.IsInf(x, 0):
				out[i] = -2
			default:
				out[i] = x
			}
		}
		return out
	}
	r.Points = Points{Envelope: fix(r.Points.Envelope), Ready: fix(r.Points.Ready), RPS: fix(r.Points.RPS), P99: fix(r.Points.P99), P99Exact: fix(r.Points.P99Exact)}
	return r
}

// DecodeReport reads the Report of a SimReport object.
func DecodeReport(o providers.Object) (Report, error) {
	var r Report
	if err := decodeReport(o, &r); err != nil {
		return Report{}, err
	}
	back := func(xs []float64) {
		for i, x := range xs {
			switch x {
			case -1:
				xs[i] = math.NaN()
			case -2:
				xs[i] = math.Inf(1)
			}
		}
	}
	back(r.Points.Envelope)
	back(r.Points.Ready)
	back(r.Points.RPS)
	back(r.Points.P99)
	back(r.Points.P99Exact)
	return r, nil
}

// decodeReport reads a report object's AttrReport into r.
func decodeReport(o providers.Object, r any) error {
	v, ok := o.Attributes[AttrReport]
	if !o.Exists || !ok {
		return fmt.Errorf("%s: no report", o.Address)
	}
	if err := json.Unmarshal(v.JSON(), r); err != nil {
		return fmt.Errorf("%s: %w", o.Address, err)
	}
	return nil
}
