// Package plugin carries the provider protocol over hashicorp/go-plugin:
// the handshake and version negotiation, the translation between Go values
// and protobuf on both sides, and (manager.go) starting, reusing,
// restarting and stopping provider processes.
//
// Whatever arrives from the other side is checked as it is translated: a
// malformed address, attribute path or typed value becomes a diagnostic
// (and, in a change or its result, fails that object's change), never a
// panic and never a silent drop.
package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	pb "github.com/setpoint-dev/setpoint/providers/proto"
)

// ProtocolVersion of the provider protocol this build speaks. Version 2:
// typed values, attribute paths, List, PlanChange, changes grouped per
// object. Version 3: restored fields (a provider of version 2 would drop
// them unseen and report the restore done).
const ProtocolVersion = 3

// pluginName is the one plugin a provider binary serves.
const pluginName = "provider"

// Handshake keeps a provider binary from being run as anything else: the
// cookie is checked before any protocol version is negotiated.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "SETPOINT_PROVIDER_PLUGIN",
	MagicCookieValue: "2f1c8c3e-setpoint-provider",
}

// MaxMessage bounds one gRPC message either way; Signals pages below it.
const MaxMessage = 64 << 20

// grpcPlugin is the go-plugin plugin: Impl on the server side.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	Impl providers.Full
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, &server{impl: p.Impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{rpc: pb.NewProviderClient(c), Timeout: DefaultTimeout}, nil
}

// Serve runs impl as a provider plugin speaking the given protocol version
// (the SDK passes ProtocolVersion; tests pass others). The provider's slog
// output goes to setpoint's log through go-plugin's log forwarding.
func Serve(impl providers.Full, version int) {
	dieWithParent()
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: os.Stderr, JSONFormat: true})
	slog.SetDefault(slog.New(&hclogHandler{l: logger}))
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{MagicCookieKey: Handshake.MagicCookieKey, MagicCookieValue: Handshake.MagicCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{
			version: {pluginName: &grpcPlugin{Impl: impl}},
		},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxMessage), grpc.MaxSendMsgSize(MaxMessage))...)
		},
		Logger: logger,
	})
}

// ---- translation: Go to protobuf (total: every Go value has a form) ----

func toAddr(a providers.Address) *pb.Address {
	return &pb.Address{Provider: a.Provider, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
}

var toType = map[values.Type]pb.Value_Type{
	values.Count:      pb.Value_COUNT,
	values.Bytes:      pb.Value_BYTES,
	values.Millicores: pb.Value_MILLICORES,
	values.Duration:   pb.Value_DURATION,
	values.String:     pb.Value_STRING,
	values.Structured: pb.Value_STRUCTURED,
}

var fromType = map[pb.Value_Type]values.Type{}

func init() {
	for g, p := range toType {
		fromType[p] = g
	}
}

// toValue encodes v; an invalid (zero) Value goes as INVALID, which the
// other side refuses.
func toValue(v values.Value) *pb.Value {
	t := toType[v.Type()] // INVALID when absent
	switch {
	case v.Type().Numeric():
		return &pb.Value{Type: t, Int: v.Int()}
	case v.Type() == values.String || v.Type() == values.Structured:
		return &pb.Value{Type: t, Str: v.Str()}
	}
	return &pb.Value{Type: pb.Value_INVALID}
}

func toValues(m map[addrs.Path]values.Value) map[string]*pb.Value {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]*pb.Value, len(m))
	for p, v := range m {
		out[p.String()] = toValue(v)
	}
	return out
}

func toManagers(m map[addrs.Path]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for p, v := range m {
		out[p.String()] = v
	}
	return out
}

func toObject(o providers.Object) *pb.Object {
	return &pb.Object{Address: toAddr(o.Address), Exists: o.Exists, Attributes: toValues(o.Attributes),
		Managers: toManagers(o.Managers), Labels: o.Labels, Annotations: o.Annotations, Generation: o.Generation, ObservedGeneration: o.ObservedGeneration, Repair: o.Repair}
}

var toAction = map[action.Action]pb.ObjectChange_Action{
	action.NoOp:   pb.ObjectChange_NO_OP,
	action.Create: pb.ObjectChange_CREATE,
	action.Update: pb.ObjectChange_UPDATE,
	action.Delete: pb.ObjectChange_DELETE,
}

func toChange(c providers.ObjectChange) *pb.ObjectChange {
	act, ok := toAction[c.Action]
	if !ok {
		act = pb.ObjectChange_Action(c.Action) // unknown: refused by the other side
	}
	x := &pb.ObjectChange{Address: toAddr(c.Address), Action: act, Attributes: toValues(c.Attributes),
		Manager: c.Manager, Force: c.Force, Reason: c.Reason, InPlace: c.InPlace}
	if len(c.Seen) > 0 {
		x.Seen = toValues(c.Seen)
	}
	if len(c.Restored) > 0 {
		x.Restored = toValues(c.Restored)
	}
	if len(c.Changed) > 0 {
		x.Changed = make([]string, len(c.Changed))
		for i, p := range c.Changed {
			x.Changed[i] = p.String()
		}
	}
	for _, p := range c.Released {
		x.Released = append(x.Released, p.String())
	}
	return x
}

func toResult(r providers.ObjectResult) *pb.ObjectResult {
	x := &pb.ObjectResult{Error: r.Err, After: toValues(r.After)}
	for _, c := range r.Conflicts {
		x.Conflicts = append(x.Conflicts, &pb.Conflict{Path: c.Path.String(), Manager: c.Manager})
	}
	return x
}

func toDiags(ds []providers.Diagnostic) []*pb.Diagnostic {
	if len(ds) == 0 {
		return nil
	}
	out := make([]*pb.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := pb.Diagnostic_ERROR
		if d.Severity == providers.Warning {
			sev = pb.Diagnostic_WARNING
		}
		x := &pb.Diagnostic{Severity: sev, Message: d.Message, Detail: d.Detail, File: d.Pos.File, Line: clamp32(d.Pos.Line),
			Column: clamp32(d.Pos.Col), Path: d.Path, Expected: d.Expected, Spec: d.Spec}
		if d.Address != nil {
			x.Address = toAddr(*d.Address)
		}
		out = append(out, x)
	}
	return out
}

func clamp32(n int) int32 {
	return int32(max(min(n, 1<<31-1), 0))
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ---- translation: protobuf to Go (checked) ----

// fromAddr reads an address: provider, kind and name are required, and the
// parts must print and parse back to themselves (no '/' in a part, no ':'
// in the provider).
func fromAddr(a *pb.Address) (providers.Address, error) {
	if a == nil {
		return providers.Address{}, fmt.Errorf("no address")
	}
	o := providers.Address{Provider: a.Provider, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
	back, err := addrs.ParseObject(o.String())
	if err != nil {
		return providers.Address{}, fmt.Errorf("malformed address {provider %q, kind %q, namespace %q, name %q}: %v", a.Provider, a.Kind, a.Namespace, a.Name, err)
	}
	if back != o {
		return providers.Address{}, fmt.Errorf("malformed address {provider %q, kind %q, namespace %q, name %q}: it reads back as %s", a.Provider, a.Kind, a.Namespace, a.Name, back)
	}
	return o, nil
}

func fromPath(s string) (addrs.Path, error) {
	p, err := addrs.ParsePath(s)
	if err != nil {
		return addrs.Path{}, fmt.Errorf("malformed attribute path: %v", err)
	}
	return p, nil
}

// fromValue reads a typed value: numbers carry no text, strings and
// structured values no number, structured text is a JSON object or list.
func fromValue(v *pb.Value) (values.Value, error) {
	if v == nil {
		return values.Value{}, fmt.Errorf("no value")
	}
	t, ok := fromType[v.Type]
	if !ok {
		return values.Value{}, fmt.Errorf("a value of unknown type %s", v.Type)
	}
	if t.Numeric() {
		if v.Str != "" {
			return values.Value{}, fmt.Errorf("a %s value with text %q", t, diag.Cut(v.Str, 64))
		}
		return values.Numeric(t, v.Int), nil
	}
	if v.Int != 0 {
		return values.Value{}, fmt.Errorf("a %s value with the number %d", t, v.Int)
	}
	if t == values.Structured {
		x, err := values.StructuredOf([]byte(v.Str))
		if err != nil {
			return values.Value{}, err
		}
		return x, nil
	}
	return values.Parse(t, v.Str)
}

// fromValues reads a map of typed values by path text; what cannot be read
// is left out and said in the returned errors.
func fromValues(m map[string]*pb.Value) (map[addrs.Path]values.Value, []error) {
	out := make(map[addrs.Path]values.Value, len(m))
	var errs []error
	for k, v := range m {
		p, err := fromPath(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		x, err := fromValue(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute %s: %v", p, err))
			continue
		}
		if _, dup := out[p]; dup {
			errs = append(errs, fmt.Errorf("attribute %s given twice (as %q and another spelling)", p, k))
			continue
		}
		out[p] = x
	}
	return out, errs
}

func fromManagers(m map[string]string) (map[addrs.Path]string, []error) {
	out := make(map[addrs.Path]string, len(m))
	var errs []error
	for k, v := range m {
		p, err := fromPath(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("manager of %v", err))
			continue
		}
		out[p] = v
	}
	return out, errs
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// fromObjectBody reads everything of an object but its address (which the
// caller has checked).
func fromObjectBody(a providers.Address, o *pb.Object) (providers.Object, []error) {
	attrs, errs := fromValues(o.Attributes)
	mgrs, errs2 := fromManagers(o.Managers)
	return providers.Object{Address: a, Exists: o.Exists, Attributes: attrs, Managers: mgrs,
		Labels: nonNil(o.Labels), Annotations: nonNil(o.Annotations), Generation: o.Generation, ObservedGeneration: o.ObservedGeneration, Repair: o.Repair}, append(errs, errs2...)
}

var fromAction = map[pb.ObjectChange_Action]action.Action{}

func init() {
	for g, p := range toAction {
		fromAction[p] = g
	}
}

// fromChange reads one object's change; any malformed part refuses it
// whole.
func fromChange(c *pb.ObjectChange) (providers.ObjectChange, error) {
	if c == nil {
		return providers.ObjectChange{}, fmt.Errorf("no change")
	}
	a, err := fromAddr(c.Address)
	if err != nil {
		return providers.ObjectChange{}, err
	}
	act, ok := fromAction[c.Action]
	if !ok {
		return providers.ObjectChange{Address: a}, fmt.Errorf("unknown action %d", int32(c.Action))
	}
	attrs, errs := fromValues(c.Attributes)
	if len(errs) > 0 {
		return providers.ObjectChange{Address: a}, joinErrs(errs)
	}
	switch c.InPlace {
	case "", providers.InPlaceFallbackHold, providers.InPlaceFallbackRollout:
	default:
		return providers.ObjectChange{Address: a}, fmt.Errorf("unknown in-place fallback %q", c.InPlace)
	}
	out := providers.ObjectChange{Address: a, Action: act, Attributes: attrs, Manager: c.Manager, Force: c.Force, Reason: c.Reason, InPlace: c.InPlace}
	if len(c.Seen) > 0 {
		seen, errs := fromValues(c.Seen)
		if len(errs) > 0 {
			return providers.ObjectChange{Address: a}, fmt.Errorf("seen: %w", joinErrs(errs))
		}
		out.Seen = seen
	}
	for _, s := range c.Changed {
		p, err := fromPath(s)
		if err != nil {
			return providers.ObjectChange{Address: a}, fmt.Errorf("changed %v", err)
		}
		out.Changed = append(out.Changed, p)
	}
	for _, s := range c.Released {
		p, err := fromPath(s)
		if err != nil {
			return providers.ObjectChange{Address: a}, fmt.Errorf("released %v", err)
		}
		if _, set := out.Attributes[p]; set {
			return providers.ObjectChange{Address: a}, fmt.Errorf("released %s is also set", p)
		}
		out.Released = append(out.Released, p)
	}
	if len(c.Restored) > 0 {
		restored, errs := fromValues(c.Restored)
		if len(errs) > 0 {
			return providers.ObjectChange{Address: a}, fmt.Errorf("restored: %w", joinErrs(errs))
		}
		out.Restored = restored
	}
	if err := out.CheckRestored(); err != nil {
		return providers.ObjectChange{Address: a}, err
	}
	return out, nil
}

// fromResult reads one object's result into r (whose Address is set).
func fromResult(r *providers.ObjectResult, x *pb.ObjectResult) []error {
	if x == nil {
		return []error{fmt.Errorf("no result")}
	}
	r.Err = x.Error
	after, errs := fromValues(x.After)
	r.After = after
	for _, c := range x.Conflicts {
		if c == nil {
			errs = append(errs, fmt.Errorf("an empty conflict"))
			continue
		}
		p, err := fromPath(c.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("conflict: %v", err))
			continue
		}
		r.Conflicts = append(r.Conflicts, providers.Conflict{Path: p, Manager: c.Manager})
	}
	return errs
}

func joinErrs(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msg := errs[0].Error()
	for _, e := range errs[1:] {
		msg += "; " + e.Error()
	}
	return fmt.Errorf("%s", msg)
}

// fromDiags reads diagnostics; one whose address is malformed keeps its
// message and says so in its detail. An unset severity is an error.
func fromDiags(ds []*pb.Diagnostic) []providers.Diagnostic {
	out := make([]providers.Diagnostic, 0, len(ds))
	for _, d := range ds {
		if d == nil {
			out = append(out, providers.Diagnostic{Severity: providers.Warning, Message: "an empty diagnostic was sent; ignored"})
			continue
		}
		sev := providers.Error
		if d.Severity == pb.Diagnostic_WARNING {
			sev = providers.Warning
		}
		x := providers.Diagnostic{Severity: sev, Message: d.Message, Detail: d.Detail, Path: d.Path, Expected: d.Expected, Spec: d.Spec,
			Pos: spec.Pos{File: d.File, Line: int(d.Line), Col: int(d.Column)}}
		if d.Address != nil {
			if a, err := fromAddr(d.Address); err == nil {
				x.Address = &a
			} else {
				x.Detail = joinDetail(x.Detail, "the diagnostic's address is malformed: "+err.Error())
			}
		}
		out = append(out, x)
	}
	return out
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func fromSchema(r *pb.GetSchema_Response) (providers.Schema, []providers.Diagnostic) {
	s := providers.Schema{Name: r.Name, Version: r.Version, Signals: r.Signals, Events: r.Events}
	var diags []providers.Diagnostic
	for _, k := range r.Kinds {
		if k == nil {
			continue
		}
		ks := providers.KindSchema{Kind: k.Kind}
		for _, a := range k.Attributes {
			if a == nil {
				continue
			}
			p, err := fromPath(a.Path)
			if err == nil {
				t, ok := fromType[a.Type]
				if !ok {
					err = fmt.Errorf("attribute %s: unknown value type %s", p, a.Type)
				}
				if err == nil {
					ks.Attributes = append(ks.Attributes, providers.AttributeSchema{Path: p, Type: t, ReadOnly: a.ReadOnly, Description: a.Description})
					continue
				}
			}
			diags = append(diags, providers.Diagnostic{Severity: providers.Error, Message: fmt.Sprintf("schema of kind %s: an attribute is malformed and left out", k.Kind), Detail: err.Error()})
		}
		s.Kinds = append(s.Kinds, ks)
	}
	return s, diags
}

// ---- server side ----

type server struct {
	pb.UnimplementedProviderServer
	impl providers.Full
}

// guard turns a panic in the provider into an error for that call: one bad
// request must not take the process down with every other batch.
func guard(what string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("provider panicked in %s: %v", what, p)
	}
}

func malformedRequest(what string, err error, a *providers.Address) providers.Diagnostic {
	d := providers.Diagnostic{Severity: providers.Error, Message: "setpoint sent a malformed " + what, Detail: err.Error()}
	if a != nil && !a.IsZero() {
		aa := *a
		d.Address = &aa
	}
	return d
}

func (s *server) GetSchema(ctx context.Context, _ *pb.GetSchema_Request) (resp *pb.GetSchema_Response, err error) {
	defer guard("GetSchema", &err)
	sc, diags := s.impl.Schema(ctx)
	resp = &pb.GetSchema_Response{Name: sc.Name, Version: sc.Version, Signals: sc.Signals, Events: sc.Events, Diagnostics: toDiags(diags)}
	for _, k := range sc.Kinds {
		pk := &pb.GetSchema_Kind{Kind: k.Kind}
		for _, a := range k.Attributes {
			pk.Attributes = append(pk.Attributes, &pb.GetSchema_Attribute{Path: a.Path.String(), Type: toType[a.Type], ReadOnly: a.ReadOnly, Description: a.Description})
		}
		resp.Kinds = append(resp.Kinds, pk)
	}
	return resp, nil
}

func (s *server) Configure(ctx context.Context, req *pb.Configure_Request) (resp *pb.Configure_Response, err error) {
	defer guard("Configure", &err)
	diags := s.impl.Configure(ctx, providers.ConfigureRequest{Now: fromNanos(req.NowUnixNano), Config: req.ConfigJson, BaseDir: req.BaseDir, StatePath: req.StatePath})
	return &pb.Configure_Response{Diagnostics: toDiags(diags)}, nil
}

func (s *server) Read(ctx context.Context, req *pb.Read_Request) (resp *pb.Read_Response, err error) {
	defer guard("Read", &err)
	r := providers.ReadRequest{Now: fromNanos(req.NowUnixNano), Addresses: make([]providers.Address, 0, len(req.Addresses))}
	var bad []providers.Diagnostic
	for _, pa := range req.Addresses {
		a, err := fromAddr(pa)
		if err != nil {
			bad = append(bad, malformedRequest("address to read", err, nil))
			continue
		}
		r.Addresses = append(r.Addresses, a)
	}
	out := s.impl.Read(ctx, r)
	resp = &pb.Read_Response{Diagnostics: toDiags(append(bad, out.Diagnostics...)), Objects: make([]*pb.Object, len(out.Objects))}
	for i, o := range out.Objects {
		resp.Objects[i] = toObject(o)
	}
	return resp, nil
}

func (s *server) List(ctx context.Context, req *pb.List_Request) (resp *pb.List_Response, err error) {
	defer guard("List", &err)
	out := s.impl.List(ctx, providers.ListRequest{Now: fromNanos(req.NowUnixNano), Provider: req.Provider, Kind: req.Kind,
		Namespace: req.Namespace, Selector: req.Selector})
	resp = &pb.List_Response{Diagnostics: toDiags(out.Diagnostics), Objects: make([]*pb.Object, len(out.Objects))}
	for i, o := range out.Objects {
		resp.Objects[i] = toObject(o)
	}
	return resp, nil
}

// changes reads a batch of changes: the well-formed ones go to the
// provider, the others are answered failed in place.
func (s *server) changes(in []*pb.ObjectChange, run func([]providers.ObjectChange) ([]providers.ObjectResult, []providers.Diagnostic)) ([]*pb.ObjectResult, []*pb.Diagnostic) {
	good := make([]providers.ObjectChange, 0, len(in))
	failed := make([]*pb.ObjectResult, len(in))
	var bad []providers.Diagnostic
	for i, c := range in {
		ch, err := fromChange(c)
		if err != nil {
			d := malformedRequest("change", err, &ch.Address)
			bad = append(bad, d)
			failed[i] = &pb.ObjectResult{Error: "malformed change: " + err.Error()}
			continue
		}
		good = append(good, ch)
	}
	results, diags := run(good)
	diags = append(bad, diags...)
	out := make([]*pb.ObjectResult, 0, len(in))
	if len(results) != len(good) || len(bad) == 0 {
		// Nothing to merge, or a count the client will refuse as it is.
		for _, r := range results {
			out = append(out, toResult(r))
		}
		for _, r := range failed {
			if r != nil {
				out = append(out, r)
			}
		}
		return out, toDiags(diags)
	}
	j := 0
	for _, f := range failed {
		if f != nil {
			out = append(out, f)
			continue
		}
		out = append(out, toResult(results[j]))
		j++
	}
	return out, toDiags(diags)
}

func (s *server) PlanChange(ctx context.Context, req *pb.PlanChange_Request) (resp *pb.PlanChange_Response, err error) {
	defer guard("PlanChange", &err)
	results, diags := s.changes(req.Changes, func(cs []providers.ObjectChange) ([]providers.ObjectResult, []providers.Diagnostic) {
		out := s.impl.PlanChange(ctx, providers.PlanChangeRequest{Now: fromNanos(req.NowUnixNano), Changes: cs})
		return out.Results, out.Diagnostics
	})
	return &pb.PlanChange_Response{Results: results, Diagnostics: diags}, nil
}

func (s *server) Apply(ctx context.Context, req *pb.Apply_Request) (resp *pb.Apply_Response, err error) {
	defer guard("Apply", &err)
	results, diags := s.changes(req.Changes, func(cs []providers.ObjectChange) ([]providers.ObjectResult, []providers.Diagnostic) {
		out := s.impl.Apply(ctx, providers.ApplyRequest{Now: fromNanos(req.NowUnixNano), Changes: cs})
		return out.Results, out.Diagnostics
	})
	return &pb.Apply_Response{Results: results, Diagnostics: diags}, nil
}

func (s *server) Signals(ctx context.Context, req *pb.Signals_Request) (resp *pb.Signals_Response, err error) {
	defer guard("Signals", &err)
	out := s.impl.Signals(ctx, providers.SignalsRequest{Now: fromNanos(req.NowUnixNano), Cursor: req.Cursor, KnownSeries: req.KnownSeries, MaxSamples: int(req.MaxSamples), Instance: req.Instance})
	resp = &pb.Signals_Response{Cursor: out.Cursor, More: out.More, Instance: out.Instance, Diagnostics: toDiags(out.Diagnostics)}
	for _, sd := range out.Series {
		resp.Series = append(resp.Series, &pb.Signals_Series{Id: sd.ID, Labels: sd.Labels})
	}
	resp.Samples = make([]*pb.Signals_Sample, len(out.Samples))
	for i, x := range out.Samples {
		resp.Samples[i] = &pb.Signals_Sample{Series: x.Series, TimestampMs: x.T, Value: x.V}
	}
	return resp, nil
}

func (s *server) Events(req *pb.Events_Request, stream pb.Provider_EventsServer) (err error) {
	defer guard("Events", &err)
	return s.impl.Events(stream.Context(), fromNanos(req.NowUnixNano), func(e providers.Event) error {
		return stream.Send(&pb.Events_Event{NowUnixNano: nanos(e.Now), Address: toAddr(e.Address), Reason: e.Reason})
	})
}
