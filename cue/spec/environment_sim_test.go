package spec

import (
	"encoding/json"
	"testing"
)

// TestSimConfigIsACopy: the sim config decoded with its provider is handed
// out as a copy: what one reader changes (a trace made absolute, a target
// appended) the next does not see.
func TestSimConfigIsACopy(t *testing.T) {
	var p Provider
	if err := json.Unmarshal([]byte(`{"name":"sim","config":{"trace":"t.csv","window":{"from":"1m"},"workloads":[{"kind":"Deployment","name":"a","namespace":"x","perPodRPS":1,"targets":["1s"],"containers":[{"name":"c"}],"managers":{"m":"n"}}]}}`), &p); err != nil {
		t.Fatal(err)
	}
	a, err := p.SimConfig()
	if err != nil || len(a.Workloads) != 1 {
		t.Fatalf("%+v %v", a, err)
	}
	a.Trace, a.Window.From = "/abs/t.csv", Duration(0)
	w := &a.Workloads[0]
	w.Name, w.Targets, w.Containers[0].Name, w.Managers["m"] = "b", append(w.Targets, Duration(2e9)), "d", "o"
	b, _ := p.SimConfig()
	bw := b.Workloads[0]
	if b.Trace != "t.csv" || b.Window.From == 0 || bw.Name != "a" || len(bw.Targets) != 1 || bw.Containers[0].Name != "c" || bw.Managers["m"] != "n" {
		t.Fatalf("a reader's change reached the next: %+v %+v", b, bw)
	}
}
