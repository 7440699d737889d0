package state
import ("testing";"fmt")
func BenchmarkSaveWorkers(b *testing.B){
	for _, w := range []int{4, 8, 16, 32, 64} {
		b.Run(fmt.Sprint(w), func(b *testing.B){ saveWorkers = w; BenchmarkSave1Percent(b) })
	}
}
