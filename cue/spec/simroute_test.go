package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/signals"
)

// TestSimRouteGroupChecks: what setpoint validate refuses in a sim
// config's route groups, each at its field.
func TestSimRouteGroupChecks(t *testing.T) {
	const ok = `{"namespace":"shop","name":"a","vip":"127.100.0.1:8080","share":1,"errorWindow":"1m","backends":[
		{"address":"127.0.0.1:9001","capacity":100,"latency":"20ms","errorRate":"0%"},
		{"address":"127.0.0.1:9002","capacity":100,"latency":"20ms","errorRate":"0%","degrade":[
			{"from":"1m","until":"2m","latency":5,"capacity":1},{"from":"3m","until":"4m","latency":1,"capacity":0}]}]}`
	const at = "spec.providers.0.config.routeGroups"
	for _, c := range []struct {
		name   string
		groups string
		want   []FieldError
	}{
		{"valid", "[" + ok + "]", nil},
		{"a group twice, and its VIP", "[" + ok + "," + ok + "]", []FieldError{
			{Path: at + ".1.name", Message: "duplicate sim route group shop/a", Expected: "one route group per namespace and name", Related: at + ".0.name"},
			{Path: at + ".1.vip", Message: "a second route group on VIP 127.100.0.1:8080", Expected: "each VIP once", Related: at + ".0.vip"}}},
		{"an address out of range", "[" + strings.Replace(ok, "127.100.0.1:8080", "300.1.1.1:8080", 1) + "]", []FieldError{
			{Path: at + ".0.vip", Message: `invalid VIP "300.1.1.1:8080": 300.1.1.1 is not an IPv4 address`, Expected: "an IPv4 address and a port from 1 to 65535, like 127.0.0.1:9001"}}},
		{"a backend twice", "[" + strings.Replace(ok, "127.0.0.1:9002", "127.0.0.1:9001", 1) + "]", []FieldError{
			{Path: at + ".0.backends.1.address", Message: "a second backend 127.0.0.1:9001", Expected: "each backend once", Related: at + ".0.backends.0.address"}}},
		{"a port 0", "[" + strings.Replace(ok, "127.0.0.1:9002", "127.0.0.1:0", 1) + "]", []FieldError{
			{Path: at + ".0.backends.1.address", Message: `invalid backend address "127.0.0.1:0": port 0 is out of range`, Expected: "an IPv4 address and a port from 1 to 65535, like 127.0.0.1:9001"}}},
		{"an empty window", "[" + strings.Replace(ok, `"until":"2m"`, `"until":"1m"`, 1) + "]", []FieldError{
			{Path: at + ".0.backends.1.degrade.0.until", Message: "until 1m0s is not after from 1m0s", Expected: "a window that ends after it starts"}}},
		{"overlapping windows", "[" + strings.Replace(ok, `"from":"3m"`, `"from":"90s"`, 1) + "]", []FieldError{
			{Path: at + ".0.backends.1.degrade.1.from", Message: "from 1m30s is before the window before it ends (2m0s)", Expected: "windows in time order, none overlapping", Related: at + ".0.backends.1.degrade.0.until"}}},
		{"an error window too long", "[" + strings.Replace(ok, `"errorWindow":"1m"`, `"errorWindow":"1h"`, 1) + "]", []FieldError{
			{Path: at + ".0.errorWindow", Message: "error window 1h0m0s is out of range", Expected: "between 1s and 5m0s"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var groups []SimRouteGroup
			if err := json.Unmarshal([]byte(c.groups), &groups); err != nil {
				t.Fatal(err)
			}
			got := checkSimRouteGroups(at, groups)
			if len(got) != len(c.want) {
				t.Fatalf("%+v\nwant %+v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("%+v\nwant %+v", got[i], c.want[i])
				}
			}
		})
	}
}

// TestSimRouteGroupChecksRunInCheck: the Environment's Check runs them on
// its sim provider's config.
func TestSimRouteGroupChecksRunInCheck(t *testing.T) {
	cfg := `{"trace":"t.csv","workloads":[],"routeGroups":[{"namespace":"shop","name":"a","vip":"127.100.0.1","errorWindow":"1m","backends":[{"address":"127.0.0.1:9001","capacity":1}]}]}`
	e := &Environment{Spec: EnvironmentSpec{Providers: []Provider{{Name: "sim", Config: json.RawMessage(cfg)}}, Tick: Duration(5e9),
		Signals: SignalSources{Default: "embedded", Scrape: Scrape{Interval: Duration(5e9), Timeout: Duration(2e9)}, LookbackDelta: Duration(signals.DefaultLookbackDelta)}}}
	errs := e.Check()
	if len(errs) != 1 || errs[0].Path != "spec.providers.0.config.routeGroups.0.vip" {
		t.Errorf("%+v", errs)
	}
}

// TestSimNodeChecks: what setpoint validate refuses in a sim config's
// nodes, each at its field.
func TestSimNodeChecks(t *testing.T) {
	const at = "spec.providers.0.config.nodes"
	wls := map[string]int{"shop/checkout": 0}
	nodes := []SimNode{
		{Name: "a", Topology: "1x8x2", Workloads: []string{"shop/checkout"}},
		{Name: "a", Topology: "2x0x2"},
		{Name: "b", Topology: "1x4x1", Workloads: []string{"shop/nope", "shop/checkout", "shop/checkout"}},
	}
	want := []FieldError{
		{Path: at + ".1.name", Message: "duplicate sim node a", Expected: "one node per name", Related: at + ".0.name"},
		{Path: at + ".1.topology", Expected: "sockets×cores×threads like 2x8x2, at most 4096 CPUs"},
		{Path: at + ".2.workloads.0", Message: "no sim workload shop/nope", Expected: "the namespace/name of one of the sim world's workloads"},
		{Path: at + ".2.workloads.2", Message: "sim workload shop/checkout twice", Expected: "each workload once"},
	}
	got := checkSimNodes(at, nodes, wls)
	if len(got) != len(want) {
		t.Fatalf("%+v\nwant %+v", got, want)
	}
	for i := range got {
		if want[i].Message == "" && got[i].Message != "" { // the topology parser's own words
			got[i].Message = ""
		}
		if got[i] != want[i] {
			t.Errorf("%+v\nwant %+v", got[i], want[i])
		}
	}
}
