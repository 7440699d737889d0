//go:build linux

package dataplane

import "github.com/cilium/ebpf"

// program is the loaded connect4 program, for tests that read its
// run-time statistics.
func (d *Dataplane) program() *ebpf.Program { return d.objs.Connect4 }
