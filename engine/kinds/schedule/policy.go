package schedulekind

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/schedule"
	"github.com/setpoint-dev/setpoint/engine/gate"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// PolicyName keys the policy's state.
const PolicyName = "schedule"

// Policy is the Schedule's gate policy: between two non-zero counts, the
// Kubernetes HPA's behavior (stabilization windows, then the direction's
// policies counting the changes already made in their periods). A move
// from or to 0 is the 0→N decision's own (the idle timeout already
// waited; a wake-up must not wait) and passes unbounded. It persists the
// recommendations of the windows and the change log, so a restart keeps
// them.
type Policy struct {
	Behavior schedule.Behavior
	// Blocked, when set, holds every increase with this reason: what
	// stops the workload from running more pods (see blocked).
	Blocked string
}

// Memory is what the policy keeps per attribute.
type Memory struct {
	schedule.History
	// Pass is the last change the policy let through, not yet seen
	// applied; Seen the time of the last apply the log counts.
	Pass *Pass     `json:"pass,omitempty"`
	Seen time.Time `json:"seen,omitzero"`
}

// Pass is a change let through: from → to.
type Pass struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Name is the state key.
func (Policy) Name() string { return PolicyName }

// Coherent: replicas are one attribute, nothing to couple.
func (Policy) Coherent([]addrs.Path, func(addrs.Path) (values.Value, bool)) error { return nil }

// Evaluate bounds one change of replicas by the behavior.
func (p Policy) Evaluate(in gate.Input, prev json.RawMessage) (gate.Verdict, json.RawMessage) {
	var m Memory
	if prev != nil {
		_ = json.Unmarshal(prev, &m) // a state it cannot read starts over
	}
	// An apply made since the last evaluation joins the change log with
	// the change that was let through.
	if in.Applied != nil && in.Applied.At.After(m.Seen) {
		if m.Pass != nil && in.Applied.Value.Type() == values.Count {
			m.History = schedule.Applied(in.Applied.At, m.Pass.From, int(in.Applied.Value.Int()), m.History)
		}
		m.Seen, m.Pass = in.Applied.At, nil
	}
	v := gate.Verdict{Value: in.Desired}
	if !in.HasCurrent || in.Desired.Type() != values.Count || in.Current.Type() != values.Count {
		return v, save(m)
	}
	cur, des := int(in.Current.Int()), int(in.Desired.Int())
	blockedUp := func() {
		v.Hold = &plan.Hold{Kind: plan.HoldPolicy, Policy: PolicyName, Detail: p.Blocked}
		m.Pass = nil
	}
	if cur == 0 || des == 0 {
		// Sleep and wake are the schedule's; the windows start afresh
		// from the next count it runs at (recorded first, as for a
		// target just adopted: see schedule.Stabilize).
		// Nor do they count in the change log: the HPA never sees
		// KEDA's activations either.
		m.Recommendations, m.Pass = nil, nil
		if des > cur && p.Blocked != "" {
			blockedUp()
		}
		return v, save(m)
	}
	stab, recs := schedule.Stabilize(in.Now, cur, des, p.Behavior.Up.Stabilization, p.Behavior.Down.Stabilization, m.Recommendations)
	m.Recommendations = schedule.Compact(recs, maxRecommendations)
	rules := p.Behavior.Down
	if stab > cur {
		rules = p.Behavior.Up
	}
	out, bound := schedule.Limit(in.Now, cur, stab, rules, m.Events)
	m.Events = schedule.CompactEvents(schedule.KeepEvents(in.Now, m.Events, p.Behavior), maxEvents)
	if stab != des {
		v.Bounds = append(v.Bounds, plan.Bound{Kind: plan.BoundPolicy, Field: fmt.Sprintf("stabilized to %d (the %s window's %s recommendation)", stab, windowName(stab > des), extreme(stab > des))})
	}
	if bound != "" {
		v.Bounds = append(v.Bounds, plan.Bound{Kind: plan.BoundPolicy, Field: fmt.Sprintf("bounded to %d by the scale-%s policy %s", out, dir(stab > cur), bound)})
	}
	v.Value = values.CountOf(int64(out))
	if out == cur && des != cur {
		detail := fmt.Sprintf("raw %d, stabilized %d", des, stab)
		if bound != "" {
			detail += fmt.Sprintf(", held at %d by %s", out, bound)
		}
		v.Hold = &plan.Hold{Kind: plan.HoldPolicy, Policy: PolicyName, Detail: detail}
		v.Due = p.due(in.Now, cur, des, stab, m)
	}
	if out != cur {
		m.Pass = &Pass{From: cur, To: out}
	}
	if out > cur && p.Blocked != "" {
		// The windows and the log keep counting; only the raise waits.
		blockedUp()
	}
	return v, save(m)
}

// The windows' and the log's memory are bounded, far below the state's
// bound per policy (gate.MaxPolicyState): compacted, a window keeps only
// the recommendations where the count changed.
const (
	maxRecommendations = 120
	maxEvents          = 60
)

// due is when a held change may pass: when the recommendation that holds
// it leaves its window, or the oldest change of the log leaves its
// period.
func (p Policy) due(now time.Time, cur, des, stab int, m Memory) time.Time {
	var at time.Time
	later := func(t time.Time) {
		if t.After(now) && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	if stab == cur {
		for _, r := range m.Recommendations {
			switch {
			case des < cur && r.Replicas > des:
				later(r.At.Add(p.Behavior.Down.Stabilization))
			case des > cur && r.Replicas < des:
				later(r.At.Add(p.Behavior.Up.Stabilization))
			}
		}
	}
	for _, r := range []schedule.Rules{p.Behavior.Up, p.Behavior.Down} {
		for _, pol := range r.Policies {
			for _, e := range m.Events {
				later(e.At.Add(pol.Period))
			}
		}
	}
	return at
}

func save(m Memory) json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

func windowName(down bool) string {
	if down {
		return "scale-down"
	}
	return "scale-up"
}

func extreme(down bool) string {
	if down {
		return "highest"
	}
	return "lowest"
}

func dir(up bool) string {
	if up {
		return "up"
	}
	return "down"
}
