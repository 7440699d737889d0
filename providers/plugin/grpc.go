// Package plugin carries the provider protocol over hashicorp/go-plugin:
// the handshake and version negotiation, the translation between Go values
// and protobuf on both sides, and (manager.go) starting, reusing,
// restarting and stopping provider processes.
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

	"github.com/setpoint-dev/setpoint/providers"
	pb "github.com/setpoint-dev/setpoint/providers/proto"
)

// ProtocolVersion of the provider protocol this build speaks.
const ProtocolVersion = 1

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

// ---- translation ----

func toAddr(a providers.Address) *pb.Address {
	return &pb.Address{Provider: a.Provider, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
}

func fromAddr(a *pb.Address) providers.Address {
	if a == nil {
		return providers.Address{}
	}
	return providers.Address{Provider: a.Provider, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
}

func toDiags(ds []providers.Diagnostic) []*pb.Diagnostic {
	out := make([]*pb.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := pb.Diagnostic_ERROR
		if d.Severity == providers.Warning {
			sev = pb.Diagnostic_WARNING
		}
		x := &pb.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail}
		if d.Address != nil {
			x.Address = toAddr(*d.Address)
		}
		out = append(out, x)
	}
	return out
}

func fromDiags(ds []*pb.Diagnostic) []providers.Diagnostic {
	out := make([]providers.Diagnostic, 0, len(ds))
	for _, d := range ds {
		if d == nil {
			continue
		}
		sev := providers.Error
		if d.Severity == pb.Diagnostic_WARNING {
			sev = providers.Warning
		}
		x := providers.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail}
		if d.Address != nil {
			a := fromAddr(d.Address)
			x.Address = &a
		}
		out = append(out, x)
	}
	return out
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

func (s *server) GetSchema(ctx context.Context, _ *pb.GetSchema_Request) (resp *pb.GetSchema_Response, err error) {
	defer guard("GetSchema", &err)
	sc, diags := s.impl.Schema(ctx)
	resp = &pb.GetSchema_Response{Name: sc.Name, Version: sc.Version, Signals: sc.Signals, Events: sc.Events, Diagnostics: toDiags(diags)}
	for _, k := range sc.Kinds {
		pk := &pb.GetSchema_Kind{Kind: k.Kind}
		for _, a := range k.Attributes {
			pk.Attributes = append(pk.Attributes, &pb.GetSchema_Attribute{Path: a.Path, Type: a.Type, ReadOnly: a.ReadOnly, Description: a.Description})
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
	r := providers.ReadRequest{Now: fromNanos(req.NowUnixNano)}
	for _, a := range req.Addresses {
		r.Addresses = append(r.Addresses, fromAddr(a))
	}
	out := s.impl.Read(ctx, r)
	resp = &pb.Read_Response{Diagnostics: toDiags(out.Diagnostics)}
	for _, o := range out.Objects {
		resp.Objects = append(resp.Objects, &pb.Object{Address: toAddr(o.Address), Exists: o.Exists, Attributes: o.Attributes,
			Managers: o.Managers, Annotations: o.Annotations, Generation: o.Generation})
	}
	return resp, nil
}

func (s *server) Apply(ctx context.Context, req *pb.Apply_Request) (resp *pb.Apply_Response, err error) {
	defer guard("Apply", &err)
	r := providers.ApplyRequest{Now: fromNanos(req.NowUnixNano)}
	for _, c := range req.Changes {
		if c == nil {
			continue
		}
		r.Changes = append(r.Changes, providers.Change{Address: fromAddr(c.Address), Attribute: c.Attribute, Value: c.Value, Manager: c.Manager, Create: c.Create})
	}
	out := s.impl.Apply(ctx, r)
	resp = &pb.Apply_Response{Diagnostics: toDiags(out.Diagnostics)}
	for _, x := range out.Results {
		resp.Results = append(resp.Results, &pb.Apply_Result{Error: x.Err})
	}
	return resp, nil
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
