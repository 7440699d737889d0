package plugin

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/providers"
	pb "github.com/setpoint-dev/setpoint/providers/proto"
)

// answering is a provider's side that answers every call with whatever
// bytes the fuzzer made, decoded as that call's response.
type answering struct {
	pb.ProviderClient
	data []byte
}

func (a answering) Read(context.Context, *pb.Read_Request, ...grpc.CallOption) (*pb.Read_Response, error) {
	r := &pb.Read_Response{}
	return r, proto.Unmarshal(a.data, r)
}

func (a answering) List(context.Context, *pb.List_Request, ...grpc.CallOption) (*pb.List_Response, error) {
	r := &pb.List_Response{}
	return r, proto.Unmarshal(a.data, r)
}

func (a answering) Apply(context.Context, *pb.Apply_Request, ...grpc.CallOption) (*pb.Apply_Response, error) {
	r := &pb.Apply_Response{}
	return r, proto.Unmarshal(a.data, r)
}

func (a answering) GetSchema(context.Context, *pb.GetSchema_Request, ...grpc.CallOption) (*pb.GetSchema_Response, error) {
	r := &pb.GetSchema_Response{}
	return r, proto.Unmarshal(a.data, r)
}

// FuzzClientChecks: whatever a provider answers, the client never panics,
// Read returns exactly the objects asked for in order (or fails whole), List only objects
// of what was asked, Apply one result per change sent with its address,
// and every value it passes on prints and reads back (values.Parse).
func FuzzClientChecks(f *testing.F) {
	asked := []providers.Address{
		{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "checkout"},
		{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"},
	}
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	obj := toObject(providers.Object{Address: asked[0], Exists: true,
		Attributes: map[addrs.Path]values.Value{addrs.MustPath("spec.replicas"): values.CountOf(3), addrs.MustPath(`metadata.labels["app"]`): values.StringOf("x")},
		Managers:   map[addrs.Path]string{addrs.MustPath("spec.replicas"): "setpoint"}, Labels: map[string]string{"app": "x"}})
	seed(&pb.Read_Response{Objects: []*pb.Object{obj}})
	seed(&pb.List_Response{Objects: []*pb.Object{obj, obj}})
	seed(&pb.Apply_Response{Results: []*pb.ObjectResult{{Error: "", After: obj.Attributes}, {Error: "denied", Conflicts: []*pb.Conflict{{Path: "spec.replicas", Manager: "argocd-controller"}}}}})
	seed(&pb.Read_Response{Objects: []*pb.Object{{Address: &pb.Address{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "checkout"}, Attributes: map[string]*pb.Value{"spec..x": {Type: pb.Value_COUNT, Int: -1}, "spec.y": {Type: pb.Value_STRUCTURED, Str: "{"}}}}})
	f.Add([]byte{})

	checkValues := func(t *testing.T, m map[addrs.Path]values.Value) {
		for p, v := range m {
			if _, err := addrs.ParsePath(p.String()); err != nil {
				t.Fatalf("path %q passed on but does not parse: %v", p, err)
			}
			back, err := values.Parse(v.Type(), v.String())
			if err != nil || back != v {
				t.Fatalf("value %v passed on but does not read back: %v %v", v, back, err)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &Client{rpc: answering{data: data}, Name: "fuzz", Timeout: time.Second}
		ctx := context.Background()
		r := c.Read(ctx, providers.ReadRequest{Addresses: asked})
		failed := len(r.Objects) == 0 && len(r.Diagnostics) == 1 && r.Diagnostics[0].Severity == providers.Error
		if !failed && len(r.Objects) != len(asked) {
			t.Fatalf("Read: %d objects for %d asked", len(r.Objects), len(asked))
		}
		for i, o := range r.Objects {
			if o.Address != asked[i] {
				t.Fatalf("Read: object %d is %v, asked %v", i, o.Address, asked[i])
			}
			checkValues(t, o.Attributes)
		}
		l := c.List(ctx, providers.ListRequest{Provider: "sim", Kind: "Deployment", Namespace: "shop", Selector: map[string]string{"app": "x"}})
		seen := map[providers.Address]bool{}
		for _, o := range l.Objects {
			if o.Address.Provider != "sim" || o.Address.Kind != "Deployment" || o.Address.Namespace != "shop" || o.Labels["app"] != "x" || seen[o.Address] {
				t.Fatalf("List passed on %+v", o)
			}
			seen[o.Address] = true
			checkValues(t, o.Attributes)
		}
		changes := []providers.ObjectChange{
			{Address: asked[0], Action: action.Update, Attributes: map[addrs.Path]values.Value{addrs.MustPath("spec.replicas"): values.CountOf(4)}, Changed: []addrs.Path{addrs.MustPath("spec.replicas")}, Manager: "setpoint"},
			{Address: asked[1], Action: action.Create, Attributes: map[addrs.Path]values.Value{addrs.MustPath("spec.minReplicas"): values.CountOf(2)}, Manager: "setpoint"},
		}
		a := c.Apply(ctx, providers.ApplyRequest{Changes: changes})
		if len(a.Results) != len(changes) {
			t.Fatalf("Apply: %d results for %d changes", len(a.Results), len(changes))
		}
		for i, res := range a.Results {
			if res.Address != changes[i].Address {
				t.Fatalf("Apply: result %d for %v", i, res.Address)
			}
			checkValues(t, res.After)
		}
		c.Schema(ctx)
	})
}
