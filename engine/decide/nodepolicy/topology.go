package nodepolicy

import (
	"fmt"
	"strconv"
	"strings"
)

// Topology is a node's CPUs as sockets × cores per socket × threads per
// core. CPUs are numbered as Linux numbers most x86 machines: every
// socket's first thread of each core, then the second threads, so CPU
// t·S·C + s·C + c is thread t of core c on socket s, and a core's
// siblings are S·C apart. One memory node per socket.
type Topology struct {
	Sockets int `json:"sockets"`
	Cores   int `json:"cores"`
	Threads int `json:"threads"`
}

// ParseTopology reads "2x32x2" (sockets × cores per socket × threads per
// core).
func ParseTopology(s string) (Topology, error) {
	parts := strings.Split(s, "x")
	if len(parts) != 3 {
		return Topology{}, fmt.Errorf("topology %q: expected sockets×cores×threads, as in \"2x32x2\"", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 1 {
			return Topology{}, fmt.Errorf("topology %q: expected sockets×cores×threads of positive whole numbers, as in \"2x32x2\"", s)
		}
		n[i] = v
	}
	t := Topology{Sockets: n[0], Cores: n[1], Threads: n[2]}
	return t, t.Check()
}

// Check refuses an empty topology or one past MaxCPUs.
func (t Topology) Check() error {
	if t.Sockets < 1 || t.Cores < 1 || t.Threads < 1 {
		return fmt.Errorf("topology %s: every dimension is at least 1", t)
	}
	if t.Sockets > MaxCPUs || t.Cores > MaxCPUs || t.Threads > 8 || t.Sockets*t.Cores*t.Threads > MaxCPUs {
		return fmt.Errorf("topology %s: more than %d CPUs (or more than 8 threads a core)", t, MaxCPUs)
	}
	return nil
}

func (t Topology) String() string { return fmt.Sprintf("%dx%dx%d", t.Sockets, t.Cores, t.Threads) }

// CPUs is how many CPUs the node has.
func (t Topology) CPUs() int { return t.Sockets * t.Cores * t.Threads }

// CPU numbers thread th of core c on socket s.
func (t Topology) CPU(s, c, th int) int { return th*t.Sockets*t.Cores + s*t.Cores + c }

// core is a CPU's core across the node (s·C + c) and its socket.
func (t Topology) core(cpu int) (core, socket int) {
	core = cpu % (t.Sockets * t.Cores)
	return core, core / t.Cores
}

// threads are a core's CPUs, lowest first.
func (t Topology) threads(core int) []int {
	out := make([]int, t.Threads)
	for th := range out {
		out[th] = th*t.Sockets*t.Cores + core
	}
	return out
}

// Sockets lists the sockets (memory nodes) a set's CPUs are on.
func (t Topology) SocketsOf(s CPUSet) []int {
	seen := make([]bool, t.Sockets)
	var out []int
	for _, c := range s {
		if _, sock := t.core(c); !seen[sock] {
			seen[sock] = true
			out = append(out, sock)
		}
	}
	// CPUs are ordered by thread first, so sockets come out of order.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
