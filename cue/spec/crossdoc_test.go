package spec_test

import (
	"testing"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Two nodeSelectors can take one node unless they require different values
// for one label; the node they share carries both.
func TestSelectorsOverlap(t *testing.T) {
	m := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name string
		a, b map[string]string
		node string // "-": disjoint
	}{
		{"both empty", nil, nil, ""},
		{"one empty", nil, m("pool", "compute"), "pool=compute"},
		{"equal", m("pool", "compute"), m("pool", "compute"), "pool=compute"},
		{"subset", m("pool", "compute", "zone", "a"), m("pool", "compute"), "pool=compute,zone=a"},
		{"other keys", m("tier", "db"), m("pool", "compute"), "pool=compute,tier=db"},
		{"one value differs", m("pool", "compute", "zone", "a"), m("pool", "compute", "zone", "b"), "-"},
		{"differs on a shared key among others", m("pool", "compute", "rack", "1"), m("zone", "a", "pool", "batch"), "-"},
		{"empty value is a value", m("pool", ""), m("pool", "compute"), "-"},
	}
	for _, c := range cases {
		for _, swap := range []bool{false, true} {
			a, b := c.a, c.b
			if swap {
				a, b = b, a
			}
			node, ok := spec.SelectorsOverlap(a, b)
			got := "-"
			if ok {
				got = spec.SelectorString(node)
			}
			if got != c.node {
				t.Errorf("%s (swapped %t): got %q, want %q", c.name, swap, got, c.node)
			}
		}
	}
}

// An endpoint at the RouteGroup's own VIP, compared parsed, is an error at
// the endpoint; the VIP's address with another port is a backend.
func TestRouteGroupEndpointIsVIP(t *testing.T) {
	cases := []struct {
		vip, endpoint string
		msg           string
	}{
		{"127.100.0.1:8080/tcp", "127.100.0.1:8080",
			"endpoint 127.100.0.1:8080 is the RouteGroup's own VIP 127.100.0.1:8080/tcp (spec.vip): its share of the connections would come back to the VIP"},
		{"127.100.0.1:8080/tcp", "127.100.0.1:08080",
			"endpoint 127.100.0.1:08080 is the RouteGroup's own VIP 127.100.0.1:8080/tcp (spec.vip): its share of the connections would come back to the VIP"},
		{"127.100.0.1:53/udp", "127.100.0.1:53",
			"endpoint 127.100.0.1:53 is the RouteGroup's own VIP 127.100.0.1:53/udp (spec.vip): its share of the connections would come back to the VIP"},
		{"127.100.0.1:8080/tcp", "127.100.0.1:8081", ""},
		{"127.100.0.1:8080/tcp", "127.100.0.2:8080", ""},
		// A VIP that does not parse is its own error, not this one.
		{"127.100.0.300:8080/tcp", "127.100.0.1:8080", ""},
	}
	for _, c := range cases {
		r := validRouteGroup()
		r.Spec.VIP = c.vip
		endpoints(&r.Spec, "127.0.0.1:9001", c.endpoint)
		var got []spec.FieldError
		for _, fe := range r.Check() {
			if fe.Path == "spec.backends.endpoints.1" {
				got = append(got, fe)
			}
		}
		switch {
		case c.msg == "" && len(got) > 0:
			t.Errorf("%s beside %s: unexpected %v", c.endpoint, c.vip, got)
		case c.msg != "" && (len(got) != 1 || got[0].Message != c.msg):
			t.Errorf("%s beside %s: got %v, want %q", c.endpoint, c.vip, got, c.msg)
		}
	}
}
