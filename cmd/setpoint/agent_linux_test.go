package main

import (
	"strings"
	"testing"
)

// TestAgentFlagsCheckedFirst: each agent's flags are checked, per agent,
// before the kubeconfig is read: every case names a kubeconfig that does
// not exist, so a flag let through is reported as that instead.
func TestAgentFlagsCheckedFirst(t *testing.T) {
	const noKube = "kubeconfig /nonexistent"
	for _, c := range []struct {
		name string
		args []string
		want []string // each in stderr; noKube alone when the flags pass
	}{
		{"slots 0 is not the default", []string{"ebpf", "--slots", "0"}, []string{"--slots 0: want 1 to 131071"}},
		{"groups 0 is not the default", []string{"ebpf", "--groups", "0"}, []string{"--groups 0: want 1 to 256"}},
		{"too many groups", []string{"ebpf", "--groups", "257"}, []string{"--groups 257: want 1 to 256"}},
		{"slots beyond the maps", []string{"ebpf", "--slots", "131072"}, []string{"--slots 131072"}},
		{"an allow that is no prefix", []string{"ebpf", "--allow", "10.0.0.0/8,nowhere"}, []string{`--allow "nowhere"`}},
		{"no cgroup", []string{"ebpf", "--cgroup", ""}, []string{"--cgroup is required"}},
		{"plugin-idx not digits", []string{"nri", "--plugin-idx", "abc"}, []string{`--plugin-idx "abc": want two digits`}},
		{"plugin-idx of one digit", []string{"nri", "--plugin-idx", "5"}, []string{`--plugin-idx "5"`}},
		{"working-set-every below 1s", []string{"nri", "--working-set-every", "10ms"}, []string{`--working-set-every "10ms"`}},
		{"working-set-every not a duration", []string{"nri", "--working-set-every", "often"}, []string{`--working-set-every "often"`}},
		{"eBPF flags on nri", []string{"nri", "--slots", "65537", "--pin-dir", "/x"}, []string{"--pin-dir is a flag of agent ebpf, not of agent nri", "--slots is a flag of agent ebpf, not of agent nri"}},
		{"NRI flags on ebpf", []string{"ebpf", "--cache", "/x", "--plugin-idx", "50"}, []string{"--cache is a flag of agent nri, not of agent ebpf", "--plugin-idx is a flag of agent nri, not of agent ebpf"}},
		{"every problem, not the first", []string{"ebpf", "--groups", "0", "--slots", "0", "--every", "1ms"}, []string{"--groups 0", "--slots 0", "want every ≥ 100ms"}},
		{"ebpf's defaults pass", []string{"ebpf"}, []string{noKube}},
		{"nri's defaults pass", []string{"nri"}, []string{noKube}},
		{"good values pass", []string{"nri", "--plugin-idx", "07", "--working-set-every", "0s", "--topology", "1x4x2"}, []string{noKube}},
		{"good eBPF values pass", []string{"ebpf", "--groups", "256", "--slots", "1", "--allow", "10.0.0.0/8"}, []string{noKube}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"agent"}, c.args[0], "--node", "a", "--kubeconfig", "/nonexistent")
			_, errOut, code := runCLI(t, append(args, c.args[1:]...)...)
			if code != 1 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("want %q in %q", w, errOut)
				}
			}
			if c.want[0] != noKube && strings.Contains(errOut, noKube) {
				t.Errorf("the kubeconfig was read before the flags were refused: %q", errOut)
			}
		})
	}
}
