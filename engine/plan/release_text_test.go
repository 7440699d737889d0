package plan

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// TestHeldReleaseText: a held release says what it would release, a whole
// config included, where a diff of its unchanged value said "{no field
// changed}".
func TestHeldReleaseText(t *testing.T) {
	config := `{"builder":"maglev","endpoints":["127.0.0.1:9001","127.0.0.1:9002","127.0.0.1:9003"],"everyNanos":200000000,"failsafeNanos":1000000000,"jitter":0.05}`
	rg := addrs.Object{Provider: "sim", Kind: "RouteGroup", Namespace: "shop", Name: "checkout-vip"}
	hpa := addrs.Object{Provider: "sim", Kind: "HorizontalPodAutoscaler", Namespace: "shop", Name: "checkout"}
	p := &Plan{Held: []Change{
		{Address: rg, Attribute: addrs.MustPath("config"), Action: action.Update, Release: true, From: config, To: config,
			Reason: "RouteGroup/shop/checkout-vip gone", Held: &Hold{Kind: HoldPaused, Detail: "the Environment is paused"}},
		{Address: hpa, Attribute: addrs.MustPath("spec.minReplicas"), Action: action.Update, Release: true, From: "3", To: "3",
			Reason: "NFR/shop/checkout gone", Held: &Hold{Kind: HoldPaused, Detail: "the Environment is paused"}},
	}}
	var b strings.Builder
	p.Text(&b)
	out := b.String()
	if strings.Contains(out, "no field changed") {
		t.Errorf("a held release read as an empty diff:\n%s", out)
	}
	for _, want := range []string{
		"held: sim:RouteGroup/shop/checkout-vip config\n    release {…5 fields: builder, endpoints, everyNanos, failsafeNanos, jitter} (setpoint would stop managing it; the value stays) (RouteGroup/shop/checkout-vip gone): ",
		"held: sim:HorizontalPodAutoscaler/shop/checkout spec.minReplicas\n    release 3 (setpoint would stop managing it; the value stays) (NFR/shop/checkout gone): ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}
