package nodepolicy

import (
	"cmp"
	"slices"
)

// allocate gives each pool its grant of CPUs, marking owner (-1 free, -2
// reserved, else the pool's index), and returns each pool's set.
func allocate(t Topology, owner []int, pools []Pool, grant []int, prev map[string]CPUSet) []CPUSet {
	n := len(owner)
	have := make([][]int, len(pools))
	// Keep what each pool had. Prev comes from disk: a CPU two pools
	// claim goes to the earlier, so sets stay disjoint whatever it holds.
	for i, p := range pools {
		if grant[i] == 0 {
			continue
		}
		for _, c := range prev[p.Name] {
			if c >= 0 && c < n && owner[c] == -1 {
				owner[c] = i
				have[i] = append(have[i], c)
			}
		}
		if len(have[i]) > grant[i] {
			have[i] = shrink(t, owner, have[i], grant[i])
		}
	}
	for i := range pools {
		need := grant[i] - len(have[i])
		take := func(c int) {
			owner[c] = i
			have[i] = append(have[i], c)
			need--
		}
		// The siblings of threads it has first: its cores become whole.
		for _, c := range slices.Clone(have[i]) {
			core, _ := t.core(c)
			for _, s := range t.threads(core) {
				if need > 0 && owner[s] == -1 {
					take(s)
				}
			}
		}
		for need > 0 {
			sock := pickSocket(t, owner, have[i], need)
			if sock < 0 {
				break
			}
			fromSocket(t, owner, sock, &need, take)
		}
	}
	out := make([]CPUSet, len(pools))
	for i := range pools {
		slices.Sort(have[i])
		out[i] = CPUSet(have[i])
	}
	return out
}

// shrink drops a pool's CPUs down to keep: loose threads first (those on
// cores the pool holds the fewest threads of), then the highest cores.
func shrink(t Topology, owner []int, cpus []int, keep int) []int {
	held := map[int]int{}
	for _, c := range cpus {
		core, _ := t.core(c)
		held[core]++
	}
	slices.SortFunc(cpus, func(a, b int) int {
		ca, _ := t.core(a)
		cb, _ := t.core(b)
		return cmp.Or(cmp.Compare(held[ca], held[cb]), cmp.Compare(cb, ca), cmp.Compare(b, a))
	})
	for _, c := range cpus[:len(cpus)-keep] {
		owner[c] = -1
	}
	return slices.Clone(cpus[len(cpus)-keep:])
}

// pickSocket is where a pool's next CPUs come from: the socket holding
// most of its CPUs that has a free one; else the lowest socket with room
// for all it needs; else the one with the most free CPUs. -1: none free.
func pickSocket(t Topology, owner []int, have []int, need int) int {
	free := make([]int, t.Sockets)
	for c, o := range owner {
		if o == -1 {
			_, s := t.core(c)
			free[s]++
		}
	}
	mine := make([]int, t.Sockets)
	for _, c := range have {
		_, s := t.core(c)
		mine[s]++
	}
	best := -1
	for s := range t.Sockets {
		if free[s] > 0 && mine[s] > 0 && (best < 0 || mine[s] > mine[best]) {
			best = s
		}
	}
	if best >= 0 {
		return best
	}
	for s := range t.Sockets {
		if free[s] >= need {
			return s
		}
	}
	for s := range t.Sockets {
		if free[s] > 0 && (best < 0 || free[s] > free[best]) {
			best = s
		}
	}
	return best
}

// fromSocket takes CPUs on one socket: whole free cores while a whole
// core is needed, then free threads of cores already in use (so whole
// cores stay whole for others), then threads of free cores, lowest first.
func fromSocket(t Topology, owner []int, sock int, need *int, take func(int)) {
	first, last := sock*t.Cores, (sock+1)*t.Cores
	wholeFree := func(core int) bool {
		for _, c := range t.threads(core) {
			if owner[c] != -1 {
				return false
			}
		}
		return true
	}
	for core := first; core < last && *need >= t.Threads; core++ {
		if wholeFree(core) {
			for _, c := range t.threads(core) {
				take(c)
			}
		}
	}
	for _, loose := range []bool{true, false} {
		for core := first; core < last && *need > 0; core++ {
			if wholeFree(core) == loose {
				continue
			}
			for _, c := range t.threads(core) {
				if *need > 0 && owner[c] == -1 {
					take(c)
				}
			}
		}
	}
}
