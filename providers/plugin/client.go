package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/setpoint-dev/setpoint/providers"
	pb "github.com/setpoint-dev/setpoint/providers/proto"
)

// DefaultTimeout bounds every call but Events: a hung provider fails the
// call instead of stalling the loop.
const DefaultTimeout = 30 * time.Second

// Client is the engine's side of one provider process: the provider
// interface translated to gRPC, with a per-call timeout, and every response
// checked before it is believed (nil fields, unknown or malformed
// addresses, malformed paths and typed values, counts that do not match
// become diagnostics, never a panic).
type Client struct {
	// broken is set when a call finds the transport gone (the process
	// died): the manager restarts it.
	broken  atomic.Bool
	rpc     pb.ProviderClient
	Timeout time.Duration
	// Name is the provider's name, for messages.
	Name string
}

var _ providers.Full = (*Client)(nil)

func (c *Client) call(ctx context.Context) (context.Context, context.CancelFunc) {
	t := c.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	return context.WithTimeout(ctx, t)
}

func (c *Client) failed(what string, err error) providers.Diagnostic {
	if status.Code(err) == codes.Unavailable {
		c.broken.Store(true)
	}
	return providers.Diagnostic{Severity: providers.Error, Message: fmt.Sprintf("provider %s: %s failed", c.Name, what), Detail: err.Error()}
}

// malformed is the diagnostic for a part of an answer that cannot be read.
func (c *Client) malformed(what string, err error, a *providers.Address) providers.Diagnostic {
	d := providers.Diagnostic{Severity: providers.Error, Message: fmt.Sprintf("provider %s sent a malformed %s", c.Name, what), Detail: err.Error()}
	if a != nil {
		aa := *a
		d.Address = &aa
	}
	return d
}

// Schema asks the provider to describe itself.
func (c *Client) Schema(ctx context.Context) (providers.Schema, []providers.Diagnostic) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.GetSchema(ctx, &pb.GetSchema_Request{})
	if err != nil {
		return providers.Schema{}, []providers.Diagnostic{c.failed("GetSchema", err)}
	}
	s, bad := fromSchema(r)
	for i := range bad {
		bad[i].Message = fmt.Sprintf("provider %s: %s", c.Name, bad[i].Message)
	}
	return s, append(fromDiags(r.Diagnostics), bad...)
}

// Configure hands the provider its configuration.
func (c *Client) Configure(ctx context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Configure(ctx, &pb.Configure_Request{NowUnixNano: nanos(req.Now), ConfigJson: req.Config, BaseDir: req.BaseDir, StatePath: req.StatePath})
	if err != nil {
		return []providers.Diagnostic{c.failed("Configure", err)}
	}
	return fromDiags(r.Diagnostics)
}

// object reads one object of an answer, its address already checked; the
// parts that cannot be read are left out and reported.
func (c *Client) object(a providers.Address, o *pb.Object, diags *[]providers.Diagnostic) providers.Object {
	obj, errs := fromObjectBody(a, o)
	for _, err := range errs {
		*diags = append(*diags, c.malformed("attribute", err, &a))
	}
	return obj
}

// Read reads a batch. Objects come back in the order asked; anything the
// provider returns for an address it was not asked about is dropped with a
// warning, and an address it says nothing of is reported as an error.
func (c *Client) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	ctx, cancel := c.call(ctx)
	defer cancel()
	pr := &pb.Read_Request{NowUnixNano: nanos(req.Now), Addresses: make([]*pb.Address, len(req.Addresses))}
	for i, a := range req.Addresses {
		pr.Addresses[i] = toAddr(a)
	}
	r, err := c.rpc.Read(ctx, pr)
	if err != nil {
		return providers.ReadResponse{Diagnostics: []providers.Diagnostic{c.failed("Read", err)}}
	}
	out := providers.ReadResponse{Diagnostics: fromDiags(r.Diagnostics), Objects: make([]providers.Object, 0, len(req.Addresses))}
	got := make(map[providers.Address]*pb.Object, len(r.Objects))
	for _, o := range r.Objects {
		if o == nil || o.Address == nil || (o.Address.Provider == "" && o.Address.Kind == "" && o.Address.Namespace == "" && o.Address.Name == "") {
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Message: fmt.Sprintf("provider %s returned an object without an address; ignored", c.Name)})
			continue
		}
		a, err := fromAddr(o.Address)
		if err != nil {
			out.Diagnostics = append(out.Diagnostics, c.malformed("object address; the object is ignored", err, nil))
			continue
		}
		got[a] = o
	}
	asked := make(map[providers.Address]bool, len(req.Addresses))
	for _, a := range req.Addresses {
		asked[a] = true
		o, ok := got[a]
		if !ok {
			aa := a
			out.Objects = append(out.Objects, providers.Object{Address: a})
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Error, Message: fmt.Sprintf("provider %s said nothing about %s", c.Name, a), Address: &aa})
			continue
		}
		out.Objects = append(out.Objects, c.object(a, o, &out.Diagnostics))
	}
	for a := range got {
		if !asked[a] {
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Message: fmt.Sprintf("provider %s returned %s, which was not asked for; ignored", c.Name, a)})
		}
	}
	return out
}

// List lists the objects of a kind whose labels match the selector, in
// address order. An object outside what was asked (another provider, kind
// or namespace, labels that do not match), a duplicate, or one with a
// malformed address is dropped with a warning.
func (c *Client) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.List(ctx, &pb.List_Request{NowUnixNano: nanos(req.Now), Provider: req.Provider, Kind: req.Kind, Namespace: req.Namespace, Selector: req.Selector})
	if err != nil {
		return providers.ListResponse{Diagnostics: []providers.Diagnostic{c.failed("List", err)}}
	}
	out := providers.ListResponse{Diagnostics: fromDiags(r.Diagnostics), Objects: make([]providers.Object, 0, len(r.Objects))}
	seen := make(map[providers.Address]bool, len(r.Objects))
	drop := func(why string, a *providers.Address) {
		d := providers.Diagnostic{Severity: providers.Warning, Message: fmt.Sprintf("provider %s listed %s; ignored", c.Name, why)}
		if a != nil {
			aa := *a
			d.Address = &aa
		}
		out.Diagnostics = append(out.Diagnostics, d)
	}
	for _, o := range r.Objects {
		if o == nil {
			drop("an empty object", nil)
			continue
		}
		a, err := fromAddr(o.Address)
		if err != nil {
			out.Diagnostics = append(out.Diagnostics, c.malformed("object address; the object is ignored", err, nil))
			continue
		}
		switch {
		case req.Provider != "" && a.Provider != req.Provider:
			drop(fmt.Sprintf("%s, of another provider than %q", a, req.Provider), &a)
			continue
		case a.Kind != req.Kind:
			drop(fmt.Sprintf("%s, not of kind %s", a, req.Kind), &a)
			continue
		case req.Namespace != "" && a.Namespace != req.Namespace:
			drop(fmt.Sprintf("%s, not in namespace %s", a, req.Namespace), &a)
			continue
		case seen[a]:
			drop(fmt.Sprintf("%s twice", a), &a)
			continue
		}
		if k, ok := mismatch(req.Selector, o.Labels); ok {
			drop(fmt.Sprintf("%s, whose label %s does not match the selector", a, k), &a)
			continue
		}
		seen[a] = true
		out.Objects = append(out.Objects, c.object(a, o, &out.Diagnostics))
	}
	sort.Slice(out.Objects, func(i, j int) bool { return out.Objects[i].Address.String() < out.Objects[j].Address.String() })
	return out
}

// mismatch returns the first selector key (in order) labels do not match.
func mismatch(sel, labels map[string]string) (string, bool) {
	for _, k := range sortedKeys(sel) {
		if v, ok := labels[k]; !ok || v != sel[k] {
			return k, true
		}
	}
	return "", false
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range maps.Keys(m) {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// changes sends a batch of object changes through call (PlanChange or
// Apply) and reads one result per change, in order. If the call fails as
// a whole (the provider died, timed out) or the answer does not hold one
// result per change, every change of the batch is reported failed: none
// of it is recorded. A result with a malformed part is failed too, its
// problem in a diagnostic.
func (c *Client) changes(ctx context.Context, what string, now time.Time, changes []providers.ObjectChange,
	call func(context.Context, int64, []*pb.ObjectChange) ([]*pb.ObjectResult, []*pb.Diagnostic, error)) ([]providers.ObjectResult, []providers.Diagnostic) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	in := make([]*pb.ObjectChange, len(changes))
	for i, ch := range changes {
		in[i] = toChange(ch)
	}
	results, pdiags, err := call(ctx, nanos(now), in)
	var diags []providers.Diagnostic
	failAll := func(why string) ([]providers.ObjectResult, []providers.Diagnostic) {
		out := make([]providers.ObjectResult, len(changes))
		for i, ch := range changes {
			out[i] = providers.ObjectResult{Address: ch.Address, Err: why}
		}
		return out, diags
	}
	if err != nil {
		d := c.failed(what, err)
		diags = append(diags, d)
		return failAll(fmt.Sprintf("the batch failed: %s: %s", d.Message, d.Detail))
	}
	diags = fromDiags(pdiags)
	if len(results) != len(changes) {
		return failAll(fmt.Sprintf("provider %s answered %d results for %d changes: the batch is treated as failed", c.Name, len(results), len(changes)))
	}
	out := make([]providers.ObjectResult, len(changes))
	for i, ch := range changes {
		res := providers.ObjectResult{Address: ch.Address}
		if errs := fromResult(&res, results[i]); len(errs) > 0 {
			err := joinErrs(errs)
			diags = append(diags, c.malformed(what+" result", err, &ch.Address))
			res.Err = joinDetail(res.Err, fmt.Sprintf("provider %s answered a malformed result: %v", c.Name, err))
		}
		out[i] = res
	}
	return out, diags
}

// PlanChange asks whether each change would be accepted, changing nothing.
// It fails whole as Apply does.
func (c *Client) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	res, diags := c.changes(ctx, "PlanChange", req.Now, req.Changes, func(ctx context.Context, now int64, cs []*pb.ObjectChange) ([]*pb.ObjectResult, []*pb.Diagnostic, error) {
		r, err := c.rpc.PlanChange(ctx, &pb.PlanChange_Request{NowUnixNano: now, Changes: cs})
		if err != nil {
			return nil, nil, err
		}
		return r.Results, r.Diagnostics, nil
	})
	return providers.PlanChangeResponse{Results: res, Diagnostics: diags}
}

// Apply applies a batch. If the call fails as a whole (the provider died,
// timed out), every change of the batch is reported failed: none of it is
// recorded as applied.
func (c *Client) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	res, diags := c.changes(ctx, "Apply", req.Now, req.Changes, func(ctx context.Context, now int64, cs []*pb.ObjectChange) ([]*pb.ObjectResult, []*pb.Diagnostic, error) {
		r, err := c.rpc.Apply(ctx, &pb.Apply_Request{NowUnixNano: now, Changes: cs})
		if err != nil {
			return nil, nil, err
		}
		return r.Results, r.Diagnostics, nil
	})
	return providers.ApplyResponse{Results: res, Diagnostics: diags}
}

// Signals fetches samples since the request's cursor.
func (c *Client) Signals(ctx context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Signals(ctx, &pb.Signals_Request{NowUnixNano: nanos(req.Now), Cursor: req.Cursor, KnownSeries: req.KnownSeries, MaxSamples: uint32(min(max(req.MaxSamples, 0), math.MaxUint32)), Instance: req.Instance})
	if err != nil {
		return providers.SignalsResponse{Cursor: req.Cursor, Diagnostics: []providers.Diagnostic{c.failed("Signals", err)}}
	}
	out := providers.SignalsResponse{Cursor: r.Cursor, More: r.More, Instance: r.Instance, Diagnostics: fromDiags(r.Diagnostics)}
	for _, s := range r.Series {
		if s != nil {
			out.Series = append(out.Series, providers.SeriesDef{ID: s.Id, Labels: s.Labels})
		}
	}
	out.Samples = make([]providers.Sample, 0, len(r.Samples))
	for _, s := range r.Samples {
		if s != nil {
			out.Samples = append(out.Samples, providers.Sample{Series: s.Series, T: s.TimestampMs, V: s.Value})
		}
	}
	return out
}

// Events streams world changes until ctx ends or the provider stops. An
// event with a malformed address is not sent on; it is logged as a
// warning under the provider's name.
func (c *Client) Events(ctx context.Context, now time.Time, send func(providers.Event) error) error {
	st, err := c.rpc.Events(ctx, &pb.Events_Request{NowUnixNano: nanos(now)})
	if err != nil {
		return err
	}
	for {
		e, err := st.Recv()
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		a, err := fromAddr(e.Address)
		if err != nil {
			slog.Warn("provider sent an event with a malformed address; ignored", "provider", c.Name, "reason", e.Reason, "error", err)
			continue
		}
		if err := send(providers.Event{Now: fromNanos(e.NowUnixNano), Address: a, Reason: e.Reason}); err != nil {
			return err
		}
	}
}
