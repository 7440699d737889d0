package main

import (
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/ebpf"
	"github.com/setpoint-dev/setpoint/providers/nri"
)

// The node agents exist where BPF and NRI do.
func init() {
	builtIn[ebpf.Name] = func() providers.Full { return ebpf.New() }
	builtIn[nri.Name] = func() providers.Full { return nri.New() }
}
