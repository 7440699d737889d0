package plan

import (
	"strings"
	"testing"
)

func TestFieldDiff(t *testing.T) {
	pad := `"metrics":{"path":"/metrics","queue":"backend_queue_depth","latency":"backend_latency_p95_seconds"}`
	from := `{"vip":"127.100.0.1:8080","table":"observe","endpoints":["127.0.0.1:9001"],"params":{"slots":65537,"alpha":0.3},` + pad + `}`
	to := `{"vip":"127.100.0.1:8080","table":"enforce","endpoints":["127.0.0.1:9001","127.0.0.1:9002"],"params":{"slots":65537,"alpha":0.5},"burst":10,` + pad + `}`
	got, ok := fieldDiff(from, to)
	want := `{burst: unset → 10, endpoints: ["127.0.0.1:9001"] → ["127.0.0.1:9001","127.0.0.1:9002"], params.alpha: 0.3 → 0.5, table: "observe" → "enforce"}`
	if !ok || got != want {
		t.Errorf("fieldDiff\n got %s\nwant %s", got, want)
	}
	if _, ok := fieldDiff("3", "4"); ok {
		t.Error("scalars are not diffed")
	}
	if _, ok := fieldDiff(`{"a":1}`, `{"a":2}`); ok {
		t.Error("a short object reads whole")
	}
	if got, _ := fieldDiff(from, from); got != "{no field changed}" {
		t.Errorf("the same object: %s", got)
	}
	var many []string
	for i := range 12 {
		many = append(many, `"k`+string(rune('a'+i))+`":1`)
	}
	manyTo := strings.ReplaceAll("{"+strings.Join(many, ",")+"}", ":1", ":2")
	if got, _ := fieldDiff("{"+strings.Join(many, ",")+","+pad+"}", manyTo[:len(manyTo)-1]+","+pad+"}"); !strings.HasSuffix(got, ", and 4 more}") {
		t.Errorf("12 changed fields: %s, want 8 and 4 more", got)
	}
}

func TestShortValue(t *testing.T) {
	if got := shortValue("3"); got != "3" {
		t.Errorf("a short value: %s", got)
	}
	long := `{"vip":"127.100.0.1:8080","table":"observe","endpoints":["127.0.0.1:9001","127.0.0.1:9002","127.0.0.1:9003","127.0.0.1:9004"]}`
	if got := shortValue(long); got != "{…3 fields: endpoints, table, vip}" {
		t.Errorf("a long object: %s", got)
	}
	if got := shortValue(strings.Repeat("é", 200)); len([]rune(got)) != maxShown {
		t.Errorf("a long string is clipped to %d runes: %d", maxShown, len([]rune(got)))
	}
}
