// Package specs is the shipped example directory; Go code here only embeds
// its trace (with its attribution), so `setpoint init --provider sim` can
// write a starting directory that replays it. The spec loader reads YAML
// and CUE files only.
package specs

import _ "embed"

// Trace is the shipped request trace (CC-BY-4.0: TraceReadme says whose).
//
//go:embed traces/azure-llm-conv-2023.csv
var Trace []byte

// TraceName is Trace's file name.
const TraceName = "azure-llm-conv-2023.csv"

// TraceReadme is the traces' README, with the attribution that must stay
// beside every copy.
//
//go:embed traces/README.md
var TraceReadme []byte
