package nodepolicy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxCPUs bounds a topology and every CPU list: a node with more is not a
// node this policy was written for, and a list like "0-999999999" must
// not cost memory.
const MaxCPUs = 4096

// CPUSet is a set of CPU IDs, sorted and without duplicates; it reads and
// writes the kernel's list format ("0-3,8,10-11").
type CPUSet []int

// ParseCPUSet reads a list in the kernel's format. Every ID must be below
// MaxCPUs; "" is the empty set.
func ParseCPUSet(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > 16*MaxCPUs {
		return nil, fmt.Errorf("a CPU list of %d characters: longer than any list of %d CPUs", len(s), MaxCPUs)
	}
	seen := make([]bool, MaxCPUs)
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := cpuID(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if isRange {
			if b, err = cpuID(hi); err != nil {
				return nil, fmt.Errorf("%q: %w", part, err)
			}
			if b < a {
				return nil, fmt.Errorf("%q: a range runs from low to high", part)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	var out CPUSet
	for c, ok := range seen {
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

func cpuID(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("expected a CPU number, as in \"0-3,8\"")
	}
	if n >= MaxCPUs {
		return 0, fmt.Errorf("CPU %d: at most %d CPUs", n, MaxCPUs)
	}
	return n, nil
}

// String writes the kernel's list format.
func (s CPUSet) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// MarshalText writes the list format, so JSON carries "0-3".
func (s CPUSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the list format.
func (s *CPUSet) UnmarshalText(b []byte) error {
	v, err := ParseCPUSet(string(b))
	*s = v
	return err
}

// Contains reports whether cpu is in the set.
func (s CPUSet) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s, cpu)
	return ok
}

// Equal reports whether two sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool { return slices.Equal(s, o) }

// setOf turns a membership mask into a set.
func setOf(mask []bool) CPUSet {
	var out CPUSet
	for c, ok := range mask {
		if ok {
			out = append(out, c)
		}
	}
	return out
}
