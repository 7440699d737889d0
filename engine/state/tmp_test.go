package state
import ("testing";"crypto/sha256")
func BenchmarkDetect20k(b *testing.B){
	s := New()
	for i := range benchObjects { fillObject(s, i, 0) }
	var enc encoder
	for b.Loop(){ for _, x := range s.objects { d,_ := enc.attrs(x,false); _ = sha256.Sum256(d) } }
}
func BenchmarkDetectNoHash20k(b *testing.B){
	s := New()
	for i := range benchObjects { fillObject(s, i, 0) }
	var enc encoder
	for b.Loop(){ for _, x := range s.objects { enc.attrs(x,false) } }
}
