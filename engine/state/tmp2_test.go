package state
import ("testing";"fmt";"path/filepath";"github.com/setpoint-dev/setpoint/internal/atomicfile")
func benchWrites(b *testing.B, workers int) {
	dir := b.TempDir()
	data := oneShard()
	defer cpuTime(b)()
	for b.Loop() {
		parallel(200, workers, func() func(int) { return func(i int) {
			if err := atomicfile.WriteNoDirSync(filepath.Join(dir, fmt.Sprintf("f%d.json", i)), data, 0o600); err != nil { b.Fatal(err) }
		}})
		atomicfile.SyncDir(dir)
	}
}
func BenchmarkW1(b *testing.B){ benchWrites(b,1) }
func BenchmarkW8(b *testing.B){ benchWrites(b,8) }
func BenchmarkW32(b *testing.B){ benchWrites(b,32) }
func BenchmarkW64(b *testing.B){ benchWrites(b,64) }
