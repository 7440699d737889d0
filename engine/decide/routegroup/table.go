package routegroup

import (
	"encoding/binary"
	"fmt"
)

// Builders of a slot table from slot counts.
const (
	BuildReplicate = "replicate"
	BuildMaglev    = "maglev"
)

// Empty marks a slot no backend owns (never left in a built table).
const Empty = ^uint32(0)

// Build fills out (one entry per slot: the index of the backend in names)
// with the builder's layout. counts must sum to len(out).
func Build(builder string, names []string, counts []int, out []uint32) error {
	total := 0
	for _, c := range counts {
		if c < 0 {
			return fmt.Errorf("negative slot count %d", c)
		}
		total += c
	}
	if total != len(out) || len(names) != len(counts) {
		return fmt.Errorf("slot counts sum to %d for a table of %d slots (%d names, %d counts)", total, len(out), len(names), len(counts))
	}
	switch builder {
	case BuildReplicate:
		Replicate(counts, out)
	case BuildMaglev:
		// Maglev's permutations visit every slot only when the size is
		// prime; otherwise the fill may never end.
		if !IsPrime(len(out)) {
			return fmt.Errorf("a Maglev table of %d slots: the size must be prime", len(out))
		}
		Maglev(names, counts, out)
	default:
		return fmt.Errorf("table builder %q: want %s or %s", builder, BuildReplicate, BuildMaglev)
	}
	return nil
}

// Replicate lays backends out in runs, in order: backend 0 owns the first
// counts[0] slots, and so on. Any change of count shifts every later run,
// so ownership churn is high; it is the cheapest to build.
func Replicate(counts []int, out []uint32) {
	k := 0
	for i, c := range counts {
		for range c {
			out[k] = uint32(i)
			k++
		}
	}
}

// Maglev fills out by weighted Maglev: each backend walks its own
// permutation of the slots (offset and skip from two hashes of its name,
// so every node computes the same bytes), and in each round every backend
// still short of its count takes its next free slot. A backend's slots
// depend on its name and the counts, not on its position, so a change in
// the set moves few slots beyond those whose counts changed. len(out) must
// be prime for every skip to visit every slot.
func Maglev(names []string, counts []int, out []uint32) {
	m := uint64(len(out))
	offsets, skips := make([]uint64, len(names)), make([]uint64, len(names))
	for i, name := range names {
		offsets[i], skips[i] = MaglevPermutation(name, m)
	}
	maglevFill(offsets, skips, counts, out)
}

// MaglevPermutation is a backend's walk through a table of m slots: where
// it starts and its stride, from FNV-1a of its name (and of "skip:" and
// its name).
func MaglevPermutation(name string, m uint64) (offset, skip uint64) {
	if m == 0 {
		return 0, 0
	}
	offset = fnv64(fnvBasis, name) % m
	skip = 1
	if m > 1 {
		skip = fnv64(fnvBasis, "skip:"+name)%(m-1) + 1
	}
	return offset, skip
}

func maglevFill(offsets, skips []uint64, counts []int, out []uint32) {
	m := uint64(len(out))
	for i := range out {
		out[i] = Empty
	}
	if m == 0 {
		return
	}
	type walker struct {
		pos, skip uint64
		left      int
	}
	ws := make([]walker, len(counts))
	active := make([]int, 0, len(counts))
	for i := range ws {
		ws[i] = walker{pos: offsets[i], skip: skips[i], left: counts[i]}
		if counts[i] > 0 {
			active = append(active, i)
		}
	}
	for len(active) > 0 {
		keep := active[:0]
		for _, i := range active {
			w := &ws[i]
			for out[w.pos] != Empty {
				w.pos += w.skip
				if w.pos >= m {
					w.pos -= m
				}
			}
			out[w.pos] = uint32(i)
			w.left--
			if w.left > 0 {
				keep = append(keep, i)
			}
		}
		active = keep
	}
}

// Churn is the fraction of slots whose owner (by name) differs between two
// tables: what a change really moves, which for Maglev can exceed the sum
// of count changes and for replication usually does.
func Churn(oldNames []string, old []uint32, newNames []string, cur []uint32) float64 {
	if len(old) != len(cur) || len(cur) == 0 {
		return 1
	}
	moved := 0
	for i := range cur {
		if owner(oldNames, old[i]) != owner(newNames, cur[i]) {
			moved++
		}
	}
	return float64(moved) / float64(len(cur))
}

func owner(names []string, i uint32) string {
	if int(i) < len(names) {
		return names[i]
	}
	return ""
}

// Bytes encodes a table as the dataplane stores it, little-endian u32 per
// slot: the same table is the same bytes on every node.
func Bytes(table []uint32) []byte {
	b := make([]byte, 4*len(table))
	for i, v := range table {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// IsPrime says whether n is prime (trial division: tables are at most
// MaxSlots).
func IsPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
