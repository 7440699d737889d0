package engine

import (
	"testing"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/providers"
)

func TestRefusal(t *testing.T) {
	a := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}
	b := addrs.Object{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "b"}
	oc := providers.ObjectChange{Address: a}
	boom := []providers.Diagnostic{{Severity: diag.Warning, Message: "slow"}, {Severity: diag.Error, Message: "boom"}}
	cases := []struct {
		name    string
		results []providers.ObjectResult
		diags   []providers.Diagnostic
		want    string
	}{
		{"taken", []providers.ObjectResult{{Address: a}}, nil, ""},
		{"taken, address left out", []providers.ObjectResult{{}}, nil, ""},
		{"no answer", nil, nil, "the provider did not answer for this change"},
		{"no answer, with the first error", nil, boom, "the provider did not answer for this change: boom"},
		{"answered for another", []providers.ObjectResult{{Address: b}}, nil, "the provider answered for sim:Deployment/shop/b in its place"},
		{"refused", []providers.ObjectResult{{Address: a, Err: "denied"}}, nil, "denied"},
		{"conflicts", []providers.ObjectResult{{Address: a, Conflicts: []providers.Conflict{{Path: addrs.MustPath("spec.replicas"), Manager: "argocd-controller"}}}}, nil,
			"conflicts: spec.replicas owned by argocd-controller"},
	}
	for _, c := range cases {
		if got := refusal(c.results, c.diags, 0, oc); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
