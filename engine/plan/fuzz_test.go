package plan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParse: a saved plan's bytes never panic the loader; one that loads
// saves to bytes that load again to the same plan (digests included); and
// whatever decodes as a plan (the checks aside) re-encodes to a fixed
// point, so a value never changes by being saved twice.
func FuzzParse(f *testing.F) {
	p := sample()
	p.Changes = append(p.Changes, Change{Address: p.Changes[0].Address, Attribute: p.Held[0].Attribute, Release: true, From: "9", To: "9",
		Value: p.Held[0].Value, By: []string{"NFR/shop/gone"}, Reason: "NFR/shop/gone gone"})
	var b bytes.Buffer
	if err := p.JSON(&b); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"formatVersion":5}`))
	f.Add([]byte(`{"formatVersion":5,"changes":[{"address":"sim:Deployment/shop/x","attribute":"spec[name=a].x","value":{"type":"bytes","value":"1Gi"},"held":{"kind":"cooldown","elapsed":"1s","total":"-5m"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if q, err := parse("fuzz", data); err == nil {
			var out bytes.Buffer
			if err := q.JSON(&out); err != nil {
				t.Fatalf("a loaded plan does not save: %v", err)
			}
			r, err := parse("again", out.Bytes())
			if err != nil {
				t.Fatalf("a saved plan does not load: %v\n%s", err, out.Bytes())
			}
			if r.ChangesDigest != q.ChangesDigest || r.Fingerprint != q.Fingerprint {
				t.Fatal("digests moved across a save")
			}
		}
		var x Plan
		if json.Unmarshal(data, &x) != nil || x.check() != nil {
			return
		}
		once, err := json.Marshal(&x)
		if err != nil {
			return // a value that decodes but cannot be written is refused on save
		}
		var y Plan
		if err := json.Unmarshal(once, &y); err != nil {
			t.Fatalf("what was written does not read back: %v\n%s", err, once)
		}
		twice, err := json.Marshal(&y)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("not a fixed point:\n%s\n%s", once, twice)
		}
	})
}
