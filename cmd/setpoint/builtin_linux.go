package main

import (
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/ebpf"
)

// The eBPF node agent exists where BPF does.
func init() {
	builtIn[ebpf.Name] = func() providers.Full { return ebpf.New() }
}
