package main

import (
	"context"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/setpoint-dev/setpoint/providers/plugin"
	pb "github.com/setpoint-dev/setpoint/providers/proto"
)

// serveWire serves a raw gRPC provider, below the SDK, so the test can
// send what no Go provider could: malformed paths, values and addresses.
func serveWire() {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: goplugin.HandshakeConfig{MagicCookieKey: plugin.Handshake.MagicCookieKey, MagicCookieValue: plugin.Handshake.MagicCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{
			plugin.ProtocolVersion: {"provider": &wirePlugin{}},
		},
		GRPCServer: goplugin.DefaultGRPCServer,
	})
}

type wirePlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

func (wirePlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterProviderServer(s, wire{})
	return nil
}

func (wirePlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

type wire struct {
	pb.UnimplementedProviderServer
}

func count(n int64) *pb.Value { return &pb.Value{Type: pb.Value_COUNT, Int: n} }

// badValues holds one good attribute and one of each malformation.
func badValues() map[string]*pb.Value {
	return map[string]*pb.Value{
		"spec.replicas": count(3),                                        // good
		"spec..bad":     count(1),                                        // malformed path
		"spec.cpu":      {Type: pb.Value_Type(42), Int: 500},             // unknown type
		"spec.config":   {Type: pb.Value_STRUCTURED, Str: "{not json"},   // bad JSON
		"spec.scalar":   {Type: pb.Value_STRUCTURED, Str: "3"},           // JSON, not an object or list
		"spec.memory":   {Type: pb.Value_BYTES, Str: "256Mi"},            // a number as text
		"spec.name":     {Type: pb.Value_STRING, Str: "x", Int: 5},       // text with a number
		"spec.unset":    {},                                              // INVALID
		"spec.nil":      nil,                                             // no value at all: sent as an empty one
		"spec.timeout":  {Type: pb.Value_DURATION, Int: 30_000_000_000},  // good
		"spec.rules":    {Type: pb.Value_STRUCTURED, Str: `{ "a" : 1 }`}, // good, compacted
	}
}

func (wire) GetSchema(context.Context, *pb.GetSchema_Request) (*pb.GetSchema_Response, error) {
	return &pb.GetSchema_Response{Name: "wire", Version: "test", Kinds: []*pb.GetSchema_Kind{{Kind: "Deployment", Attributes: []*pb.GetSchema_Attribute{
		{Path: "spec.replicas", Type: pb.Value_COUNT},
		{Path: "spec[", Type: pb.Value_COUNT},
		{Path: "spec.cpu", Type: pb.Value_Type(42)},
		{Path: "spec.cpu", Type: pb.Value_INVALID},
	}}}}, nil
}

func (wire) Configure(context.Context, *pb.Configure_Request) (*pb.Configure_Response, error) {
	return &pb.Configure_Response{}, nil
}

func (wire) Read(_ context.Context, req *pb.Read_Request) (*pb.Read_Response, error) {
	resp := &pb.Read_Response{Diagnostics: []*pb.Diagnostic{
		{Severity: pb.Diagnostic_WARNING, Message: "diag with a bad address", Address: &pb.Address{Provider: "wire", Kind: "Deployment", Namespace: "a/b", Name: "c"}},
		{Severity: pb.Diagnostic_ERROR, Message: "loader-style", File: "specs/a.yaml", Line: 3, Column: 7, Path: "spec.replicas", Expected: "a count", Spec: "NFR/shop/a"},
	}}
	for _, a := range req.Addresses {
		resp.Objects = append(resp.Objects, &pb.Object{Address: a, Exists: true, Attributes: badValues(),
			Managers: map[string]string{"spec.replicas": "setpoint", "spec[": "kubectl"}})
	}
	// An object whose address has a '/' in its name.
	resp.Objects = append(resp.Objects, &pb.Object{Address: &pb.Address{Provider: "wire", Kind: "Deployment", Namespace: "shop", Name: "x/y"}})
	return resp, nil
}

func (wire) List(_ context.Context, req *pb.List_Request) (*pb.List_Response, error) {
	return &pb.List_Response{Objects: []*pb.Object{
		{Address: &pb.Address{Provider: req.Provider, Kind: req.Kind, Namespace: "shop", Name: "b"}, Exists: true, Attributes: map[string]*pb.Value{"spec.replicas": count(2)}},
		{Address: &pb.Address{Provider: req.Provider, Kind: req.Kind, Namespace: "shop", Name: "a"}, Exists: true, Attributes: badValues()},
		{Address: &pb.Address{Provider: req.Provider, Kind: req.Kind, Name: ""}},
		nil, // sent as an empty object: no address
	}}, nil
}

// results: change 0 is fine, 1 has a malformed conflict path, 2 a
// malformed value in after, 3 an empty path in after.
func results(n int) []*pb.ObjectResult {
	out := make([]*pb.ObjectResult, n)
	for i := range out {
		switch i % 4 {
		case 0:
			out[i] = &pb.ObjectResult{After: map[string]*pb.Value{"spec.replicas": count(4)}}
		case 1:
			out[i] = &pb.ObjectResult{Error: "refused", Conflicts: []*pb.Conflict{{Path: "spec.replicas", Manager: "kubectl"}, {Path: "]", Manager: "helm"}}}
		case 2:
			out[i] = &pb.ObjectResult{After: map[string]*pb.Value{"spec.replicas": {Type: pb.Value_COUNT, Str: "four"}}}
		case 3:
			out[i] = &pb.ObjectResult{After: map[string]*pb.Value{"": count(4)}}
		}
	}
	return out
}

func (wire) PlanChange(_ context.Context, req *pb.PlanChange_Request) (*pb.PlanChange_Response, error) {
	return &pb.PlanChange_Response{Results: results(len(req.Changes))}, nil
}

func (wire) Apply(_ context.Context, req *pb.Apply_Request) (*pb.Apply_Response, error) {
	return &pb.Apply_Response{Results: results(len(req.Changes))}, nil
}

func (wire) Events(_ *pb.Events_Request, st pb.Provider_EventsServer) error {
	for _, a := range []*pb.Address{{Provider: "wire", Kind: "Deployment", Namespace: "shop", Name: "bad:name/x"}, nil, {Provider: "wire", Kind: "Deployment", Namespace: "shop", Name: "a"}} {
		if err := st.Send(&pb.Events_Event{Address: a, Reason: "tick"}); err != nil {
			return err
		}
	}
	<-st.Context().Done()
	return nil
}
