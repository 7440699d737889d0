package main

import (
	"context"
	"fmt"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// readNodeReports reads the world's report of each of its nodes at end.
func readNodeReports(ctx context.Context, w *workspace, end time.Time) ([]sim.NodeReport, error) {
	if len(w.simCfg.Nodes) == 0 {
		return nil, nil
	}
	var as []addrs.Object
	for _, n := range w.simCfg.Nodes {
		as = append(as, addrs.Object{Provider: "sim", Kind: sim.KindNodeReport, Name: n.Name})
	}
	resp := w.providers["sim"].Read(ctx, providers.ReadRequest{Now: end, Addresses: as})
	if len(resp.Objects) != len(as) {
		return nil, fmt.Errorf("reading the sim world's node reports: %d of %d", len(resp.Objects), len(as))
	}
	out := make([]sim.NodeReport, len(as))
	for i, o := range resp.Objects {
		r, err := sim.DecodeNodeReport(o)
		if err != nil {
			return nil, fmt.Errorf("reading the sim world's node report: %w", err)
		}
		out[i] = r
	}
	return out, nil
}
