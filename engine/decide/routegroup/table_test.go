package routegroup

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestReplicateByHand(t *testing.T) {
	out := make([]uint32, 5)
	if err := Build(BuildReplicate, []string{"a", "b", "c"}, []int{2, 0, 3}, out); err != nil {
		t.Fatal(err)
	}
	if want := []uint32{0, 0, 2, 2, 2}; !slices.Equal(out, want) {
		t.Errorf("replicate [2 0 3] = %v, want %v", out, want)
	}
}

func TestMaglevFillByHand(t *testing.T) {
	// M = 7. Backend 0 walks 3 5 0 2 4 6 1 (offset 3, skip 2) for 4 slots;
	// backend 1 walks 0 3 6 2 5 1 4 (offset 0, skip 3) for 3.
	// Round 1: 0→3, 1→0. Round 2: 0→5, 1→(3 taken)→6. Round 3: 0→(0)→2,
	// 1→(2, 5 taken)→1. Round 4: 0→4.
	out := make([]uint32, 7)
	maglevFill([]uint64{3, 0}, []uint64{2, 3}, []int{4, 3}, out)
	if want := []uint32{1, 1, 0, 0, 0, 0, 1}; !slices.Equal(out, want) {
		t.Errorf("weighted Maglev fill = %v, want %v", out, want)
	}
}

func TestMaglevPermutationIsFNV1a(t *testing.T) {
	h := func(s string) uint64 { f := fnv.New64a(); f.Write([]byte(s)); return f.Sum64() }
	const m = 65537
	off, skip := MaglevPermutation("127.0.0.1:9001", m)
	if off != h("127.0.0.1:9001")%m || skip != h("skip:127.0.0.1:9001")%(m-1)+1 {
		t.Errorf("permutation (%d, %d), want FNV-1a offsets (%d, %d)", off, skip, h("127.0.0.1:9001")%m, h("skip:127.0.0.1:9001")%(m-1)+1)
	}
}

func TestBuildRefusesCountsThatDoNotFill(t *testing.T) {
	out := make([]uint32, 7)
	for _, counts := range [][]int{{3, 3}, {4, 4}, {8, -1}} {
		if err := Build(BuildMaglev, []string{"a", "b"}, counts, out); err == nil {
			t.Errorf("counts %v for 7 slots: no error", counts)
		}
	}
	if err := Build("random", []string{"a"}, []int{7}, out); err == nil {
		t.Error("unknown builder: no error")
	}
	// 8 = 2 × 4: a backend whose skip is 2 or 4 walks only part of the
	// table, and the fill would spin.
	if err := Build(BuildMaglev, []string{"a", "b"}, []int{4, 4}, make([]uint32, 8)); err == nil {
		t.Error("a Maglev table of 8 slots: no error")
	}
	if err := Build(BuildReplicate, []string{"a", "b"}, []int{4, 4}, make([]uint32, 8)); err != nil {
		t.Errorf("a replicated table of 8 slots: %v", err)
	}
}

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d:8080", i>>16&255, i>>8&255, i&255)
	}
	return out
}

// Tables hold every slot for a backend of the set, each backend exactly
// its count, and the same inputs give the same bytes.
func TestTablesProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		n := 1 + r.IntN(40)
		m := []int{7, 11, 101, 251, 1009, 65537}[r.IntN(6)]
		w := make([]float64, n)
		for i := range w {
			w[i] = r.Float64()
		}
		counts := Apportion(w, m)
		ns := names(n)
		for _, b := range []string{BuildReplicate, BuildMaglev} {
			out, again := make([]uint32, m), make([]uint32, m)
			if err := Build(b, ns, counts, out); err != nil {
				t.Fatal(err)
			}
			if err := Build(b, slices.Clone(ns), slices.Clone(counts), again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(Bytes(out), Bytes(again)) {
				t.Fatalf("iter %d %s: same inputs, different bytes", iter, b)
			}
			got := make([]int, n)
			for _, v := range out {
				if int(v) >= n {
					t.Fatalf("iter %d %s: slot owner %d outside the set of %d", iter, b, v, n)
				}
				got[v]++
			}
			if !slices.Equal(got, counts) {
				t.Fatalf("iter %d %s: owners %v, want counts %v", iter, b, got, counts)
			}
		}
	}
}

// Removing one of 1,000 equal backends from a 65,537-slot Maglev table
// moves at most 1.1% of the slots (the goal); replication moves far more.
func TestMaglevChurnRemovingOne(t *testing.T) {
	const m = 65537
	maglev, replicate := churnRemovingOne(BuildMaglev, 1000, m, 500), churnRemovingOne(BuildReplicate, 1000, m, 500)
	t.Logf("removing 1 of 1000: maglev %.3f%%, replicate %.3f%% of slots change owner", 100*maglev, 100*replicate)
	if maglev > 0.011 {
		t.Errorf("maglev churn %.3f%% > 1.1%%", 100*maglev)
	}
	if maglev < 1.0/1000 {
		t.Errorf("maglev churn %.3f%%: below the removed backend's own share, impossible", 100*maglev)
	}
}

func churnRemovingOne(builder string, n, m, drop int) float64 {
	before := names(n)
	after := slices.Delete(slices.Clone(before), drop, drop+1)
	a, b := make([]uint32, m), make([]uint32, m)
	_ = Build(builder, before, Apportion(make([]float64, n), m), a)
	_ = Build(builder, after, Apportion(make([]float64, n-1), m), b)
	return Churn(before, a, after, b)
}

// Over random runs with a stable set: slots sum to the table, weights to
// 1, no backend moves more than Δmax, the same inputs give the same
// decision.
func TestStepProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for run := range 100 {
		p := defaults()
		p.Slots = []int{11, 101, 1009, 65537}[r.IntN(4)]
		p.MaxSlotsPerTick = 1 + r.IntN(p.Slots)
		p.QueueLimit = float64(r.IntN(3)) * 20
		n := 1 + r.IntN(12)
		set := names(n)
		var st State
		conn := make([]uint64, 64)
		at := t0
		for tick := range 60 {
			// Now and then a backend leaves or joins.
			removed := false
			if tick > 0 && r.IntN(10) == 0 {
				if len(set) > 1 && r.IntN(2) == 0 {
					i := r.IntN(len(set))
					set = slices.Delete(set, i, i+1)
					removed = true
				} else {
					set = append(set, fmt.Sprintf("new-%d-%d", run, tick))
				}
			}
			samples := make([]Sample, len(set))
			for i, name := range set {
				conn[i%64] += uint64(r.IntN(200))
				samples[i] = Sample{Name: name, Queue: r.Float64() * 30, Latency: r.Float64() * 0.3, ErrorRate: r.Float64() * 0.1,
					Missing: r.IntN(20) == 0, Connects: conn[i%64]}
			}
			at = at.Add(200 * time.Millisecond)
			next, d := Step(p, st, at, samples)
			next2, d2 := Step(p, st, at, samples)
			if !reflect.DeepEqual(d, d2) || !reflect.DeepEqual(next, next2) {
				t.Fatalf("run %d tick %d: the same inputs gave different decisions", run, tick)
			}
			sum, wsum := 0, 0.0
			for i := range d.Slots {
				if d.Slots[i] < 0 {
					t.Fatalf("run %d tick %d: negative slots %v", run, tick, d.Slots)
				}
				sum += d.Slots[i]
				wsum += d.Weights[i]
			}
			if sum != p.Slots || !near(wsum, 1) {
				t.Fatalf("run %d tick %d: slots sum %d (table %d), weights sum %g", run, tick, sum, p.Slots, wsum)
			}
			if !removed && tick > 0 {
				prev := map[string]int{}
				for _, b := range st.Backends {
					prev[b.Name] = b.Slots
				}
				for i, name := range d.Names {
					if abs(d.Slots[i]-prev[name]) > d.DeltaMax {
						t.Fatalf("run %d tick %d: %s moved %d → %d, Δmax %d", run, tick, name, prev[name], d.Slots[i], d.DeltaMax)
					}
				}
			}
			st = next
		}
	}
}

func TestIsPrime(t *testing.T) {
	for n, want := range map[int]bool{
		-7: false, 0: false, 1: false, 2: true, 3: true, 4: false, 9: false, 25: false,
		65521: true, 65536: false, 65537: true, 131071: true, 131073: false,
	} {
		if got := IsPrime(n); got != want {
			t.Errorf("IsPrime(%d) = %v, want %v", n, got, want)
		}
	}
	// Every number a table may have, against a sieve.
	composite := make([]bool, MaxSlots+1)
	for i := 2; i*i <= MaxSlots; i++ {
		for j := i * i; j <= MaxSlots; j += i {
			composite[j] = true
		}
	}
	for n := 2; n <= MaxSlots; n++ {
		if IsPrime(n) == composite[n] {
			t.Fatalf("IsPrime(%d) = %v", n, IsPrime(n))
		}
	}
}
