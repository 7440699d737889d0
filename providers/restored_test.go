package providers

import (
	"strings"
	"testing"

	"github.com/setpoint-dev/setpoint/engine/action"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

func TestCheckRestored(t *testing.T) {
	a := Address{Provider: "sim", Kind: "Deployment", Namespace: "shop", Name: "a"}
	r, m := addrs.MustPath("spec.replicas"), addrs.MustPath("spec.minReplicas")
	two := values.CountOf(2)
	for _, c := range []struct {
		name string
		c    ObjectChange
		want string // "" for none
	}{
		{"nothing restored", ObjectChange{Address: a, Action: action.Create}, ""},
		{"a restore", ObjectChange{Address: a, Action: action.Update, Restored: map[addrs.Path]values.Value{r: two}, Attributes: map[addrs.Path]values.Value{m: two}}, ""},
		{"on a create", ObjectChange{Address: a, Action: action.Create, Restored: map[addrs.Path]values.Value{r: two}}, "a restore is an update"},
		{"also set", ObjectChange{Address: a, Action: action.Update, Restored: map[addrs.Path]values.Value{r: two}, Attributes: map[addrs.Path]values.Value{r: two}}, `restored "spec.replicas" is also set`},
		{"also released", ObjectChange{Address: a, Action: action.Update, Restored: map[addrs.Path]values.Value{r: two}, Released: []addrs.Path{r}}, `restored "spec.replicas" is also set or released`},
		{"no path", ObjectChange{Address: a, Action: action.Update, Restored: map[addrs.Path]values.Value{{}: two}}, "has no path"},
	} {
		err := c.c.CheckRestored()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
