package state
import ("testing";"crypto/sha256";"encoding/json")
func BenchmarkDetect20k(b *testing.B){
	s := New()
	for i := range benchObjects { fillObject(s, i, 0) }
	var enc encoder
	defer cpuTime(b)()
	for b.Loop(){ for _, x := range s.objects { d,_ := enc.attrs(x,false); _ = detectSum(d) } }
}
func BenchmarkDecodeShardJSON(b *testing.B){
	data := oneShard()
	defer cpuTime(b)()
	for b.Loop(){
		var f shardFile
		if err := json.Unmarshal(data, &f); err != nil { b.Fatal(err) }
		var attrs map[string]*Entry
		if err := json.Unmarshal(f.Attrs, &attrs); err != nil { b.Fatal(err) }
	}
}
func oneShard() []byte {
	s := New()
	fillObject(s, 7, 0)
	var enc encoder
	a, _ := enc.attrs(s.objects[benchObject(7)], true)
	return shardBytes(benchObject(7), sha256.Sum256(a), a)
}
func BenchmarkDecodeShardFast(b *testing.B){
	data := oneShard()
	defer cpuTime(b)()
	for b.Loop(){
		f, ok := fastHeader(data)
		if !ok { b.Fatal("hdr") }
		if _, ok := fastAttrs(f.Attrs); !ok { b.Fatal("attrs") }
	}
}
