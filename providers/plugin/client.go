package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// checked before it is believed (nil fields, unknown addresses, counts that
// do not match become diagnostics, never a panic).
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
	return providers.Diagnostic{Severity: providers.Error, Summary: fmt.Sprintf("provider %s: %s failed", c.Name, what), Detail: err.Error()}
}

// Schema asks the provider to describe itself.
func (c *Client) Schema(ctx context.Context) (providers.Schema, []providers.Diagnostic) {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.GetSchema(ctx, &pb.GetSchema_Request{})
	if err != nil {
		return providers.Schema{}, []providers.Diagnostic{c.failed("GetSchema", err)}
	}
	s := providers.Schema{Name: r.Name, Version: r.Version, Signals: r.Signals, Events: r.Events}
	for _, k := range r.Kinds {
		if k == nil {
			continue
		}
		ks := providers.KindSchema{Kind: k.Kind}
		for _, a := range k.Attributes {
			if a != nil {
				ks.Attributes = append(ks.Attributes, providers.AttributeSchema{Path: a.Path, Type: a.Type, ReadOnly: a.ReadOnly, Description: a.Description})
			}
		}
		s.Kinds = append(s.Kinds, ks)
	}
	return s, fromDiags(r.Diagnostics)
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
	out := providers.ReadResponse{Diagnostics: fromDiags(r.Diagnostics)}
	got := make(map[providers.Address]*pb.Object, len(r.Objects))
	for _, o := range r.Objects {
		if o == nil || o.Address == nil || fromAddr(o.Address) == (providers.Address{}) {
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Summary: fmt.Sprintf("provider %s returned an object without an address; ignored", c.Name)})
			continue
		}
		got[fromAddr(o.Address)] = o
	}
	asked := make(map[providers.Address]bool, len(req.Addresses))
	for _, a := range req.Addresses {
		asked[a] = true
		o, ok := got[a]
		if !ok {
			aa := a
			out.Objects = append(out.Objects, providers.Object{Address: a})
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Error, Summary: fmt.Sprintf("provider %s said nothing about %s", c.Name, a), Address: &aa})
			continue
		}
		out.Objects = append(out.Objects, providers.Object{Address: a, Exists: o.Exists, Attributes: nonNil(o.Attributes),
			Managers: nonNil(o.Managers), Annotations: nonNil(o.Annotations), Generation: o.Generation})
	}
	for a := range got {
		if !asked[a] {
			out.Diagnostics = append(out.Diagnostics, providers.Diagnostic{Severity: providers.Warning, Summary: fmt.Sprintf("provider %s returned %s, which was not asked for; ignored", c.Name, a)})
		}
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Apply applies a batch. If the call fails as a whole (the provider died,
// timed out), every change of the batch is reported failed: none of it is
// recorded as applied.
func (c *Client) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	ctx, cancel := c.call(ctx)
	defer cancel()
	pr := &pb.Apply_Request{NowUnixNano: nanos(req.Now), Changes: make([]*pb.Change, len(req.Changes))}
	for i, ch := range req.Changes {
		pr.Changes[i] = &pb.Change{Address: toAddr(ch.Address), Attribute: ch.Attribute, Value: ch.Value, Manager: ch.Manager, Create: ch.Create}
	}
	r, err := c.rpc.Apply(ctx, pr)
	out := providers.ApplyResponse{}
	failAll := func(why string) providers.ApplyResponse {
		for _, ch := range req.Changes {
			out.Results = append(out.Results, providers.ChangeResult{Change: ch, Err: why})
		}
		return out
	}
	if err != nil {
		d := c.failed("Apply", err)
		out.Diagnostics = append(out.Diagnostics, d)
		return failAll(fmt.Sprintf("the batch failed: %s: %s", d.Summary, d.Detail))
	}
	out.Diagnostics = fromDiags(r.Diagnostics)
	if len(r.Results) != len(req.Changes) {
		return failAll(fmt.Sprintf("provider %s answered %d results for %d changes: the batch is treated as failed", c.Name, len(r.Results), len(req.Changes)))
	}
	for i, ch := range req.Changes {
		res := providers.ChangeResult{Change: ch}
		if r.Results[i] == nil {
			res.Err = "the provider returned no result for this change"
		} else {
			res.Err = r.Results[i].Error
		}
		out.Results = append(out.Results, res)
	}
	return out
}

// Signals fetches samples since the request's cursor.
func (c *Client) Signals(ctx context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	ctx, cancel := c.call(ctx)
	defer cancel()
	r, err := c.rpc.Signals(ctx, &pb.Signals_Request{NowUnixNano: nanos(req.Now), Cursor: req.Cursor, KnownSeries: req.KnownSeries, MaxSamples: uint32(req.MaxSamples), Instance: req.Instance})
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

// Events streams world changes until ctx ends or the provider stops.
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
		if err := send(providers.Event{Now: fromNanos(e.NowUnixNano), Address: fromAddr(e.Address), Reason: e.Reason}); err != nil {
			return err
		}
	}
}
