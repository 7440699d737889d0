package nfr

import "testing"

// The utilisation bound of one pod of 5 servers, 40 ms of service, a
// 150 ms p99: the search itself (not remembered), and the nested search
// it replaced.
func BenchmarkUtilisationBound(b *testing.B) {
	b.Run("one-tail", func(b *testing.B) {
		for b.Loop() {
			utilisationBound(5, 0.15/0.04, 0.99)
		}
	})
	b.Run("nested", func(b *testing.B) {
		for b.Loop() {
			nestedBound(5, 0.04, 0.15, 0.99)
		}
	})
}
