package simtable

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// sparkWidth is the columns of a backend's share over the run.
const sparkWidth = 40

// RouteTable is a route group's part of the sim summary: per backend its
// share of the requests before, during and after the degrade windows, its
// share over the run, how far its slot count ranged and how often it
// turned; then what the windows were and how the requests fared.
func RouteTable(r sim.RouteReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "route group %s/%s on %s ", r.Namespace, r.Name, r.VIP)
	if r.ConfiguredAt < 0 {
		b.WriteString("(never configured: requests split evenly)\n")
	} else {
		fmt.Fprintf(&b, "(table %s since %s)\n", r.Table, secs(r.ConfiguredAt))
	}
	names := make([]string, len(r.Phases))
	for i, p := range r.Phases {
		names[i] = p.Name
	}
	head := "share " + strings.Join(names, " / ")
	rows := make([][2]string, len(r.Backends)) // name, shares
	nameW, shareW := len("backend"), len(head)
	hi := 0.0
	var degraded []string
	for k, be := range r.Backends {
		name := be.Address
		if len(be.Degrade) > 0 {
			name += " *"
			for _, d := range be.Degrade {
				degraded = append(degraded, fmt.Sprintf("%s %s–%s: %s", be.Address, secs(d.From), secs(d.Until), degradeText(d)))
			}
		}
		shares := make([]string, len(be.Share))
		for i, v := range be.Share {
			shares[i] = pctOrDash(v, 5)
		}
		rows[k] = [2]string{name, strings.Join(shares, " / ")}
		nameW, shareW = max(nameW, len(name)), max(shareW, len(rows[k][1]))
		for _, v := range be.Points {
			hi = math.Max(hi, v)
		}
	}
	fmt.Fprintf(&b, "  %-*s  %*s  %-*s  %13s  %9s  %5s\n", nameW, "backend", shareW, head, sparkWidth, "share over the run", "slots min–max", "reversals", "flaps")
	for k, be := range r.Backends {
		fmt.Fprintf(&b, "  %-*s  %*s  %s  %13s  %9d  %5d\n", nameW, rows[k][0], shareW, rows[k][1], spark(be.Points, hi),
			fmt.Sprintf("%d–%d", be.MinSlots, be.MaxSlots), be.Reversals, be.Flaps)
	}
	for _, d := range degraded {
		fmt.Fprintf(&b, "  * degraded %s\n", d)
	}
	spans, reqs, failed, lat := make([]string, len(r.Phases)), make([]string, len(r.Phases)), make([]string, len(r.Phases)), make([]string, len(r.Phases))
	for i, p := range r.Phases {
		spans[i] = secs(p.From) + "–" + secs(p.Until)
		reqs[i] = fmt.Sprint(p.Requests)
		failed[i], lat[i] = "-", "-"
		if p.Requests > 0 {
			failed[i] = fmt.Sprintf("%.2f%%", 100*float64(p.Failed)/float64(p.Requests))
		}
		if p.MeanLatency >= 0 {
			lat[i] = (time.Duration(p.MeanLatency * float64(time.Second))).Round(100 * time.Microsecond).String()
		}
	}
	fmt.Fprintf(&b, "  requests %s in %s: failed %s, mean latency %s\n", strings.Join(reqs, " / "), strings.Join(spans, " / "), strings.Join(failed, " / "), strings.Join(lat, " / "))
	if r.ConfiguredAt >= 0 {
		regimes := make([]string, 0, len(r.RegimeTicks))
		for _, name := range []string{"laminar", "transition", "crisis", "recovery"} {
			if n := r.RegimeTicks[name]; n > 0 {
				regimes = append(regimes, fmt.Sprintf("%s %.1f%%", name, 100*float64(n)/float64(max(r.Ticks, 1))))
			}
		}
		fmt.Fprintf(&b, "  field: %d ticks, %d slots moved in %d flips, %s (%s), %d shed, %d refused\n",
			r.Ticks, r.SlotsMoved, r.Flips, load.CountNoun(r.RegimeChanges, "regime change"), strings.Join(regimes, ", "), r.Shed, r.Refused)
	}
	return b.String()
}

func secs(s int) string { return (time.Duration(s) * time.Second).String() }

// pctOrDash is a share as a percentage padded to width, or "-" when
// there was nothing to share (-1).
func pctOrDash(v float64, width int) string {
	if v < 0 {
		return fmt.Sprintf("%*s", width+1, "-")
	}
	return fmt.Sprintf("%*.1f%%", width, 100*v)
}

func degradeText(d sim.DegradeWindow) string {
	var parts []string
	if d.Latency != 1 {
		parts = append(parts, fmt.Sprintf("latency ×%g", d.Latency))
	}
	if d.Capacity != 1 {
		parts = append(parts, fmt.Sprintf("capacity ×%g", d.Capacity))
	}
	if d.ErrorRate >= 0 {
		parts = append(parts, fmt.Sprintf("errors %g%%", 100*d.ErrorRate))
	}
	if len(parts) == 0 {
		return "as usual"
	}
	return strings.Join(parts, ", ")
}

// spark draws points (shares, -1 for none) in sparkWidth columns, each
// the mean of its points, scaled to hi.
func spark(points []float64, hi float64) string {
	const levels = "▁▂▃▄▅▆▇█"
	bars := []rune(levels)
	var b strings.Builder
	per := max(1, (len(points)+sparkWidth-1)/sparkWidth)
	cols := 0
	for i := 0; i < len(points); i += per {
		sum, n := 0.0, 0
		for _, v := range points[i:min(i+per, len(points))] {
			if v >= 0 {
				sum, n = sum+v, n+1
			}
		}
		switch {
		case n == 0 || hi <= 0:
			b.WriteRune(' ')
		default:
			b.WriteRune(bars[int(math.Round(sum/float64(n)/hi*float64(len(bars)-1)))])
		}
		cols++
	}
	for ; cols < sparkWidth; cols++ {
		b.WriteRune(' ')
	}
	return b.String()
}
