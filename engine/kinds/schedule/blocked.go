package schedulekind

import (
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// blocked says why the Schedule's workload cannot be raised now, "" when
// nothing stops it: the pods of its Deployment cannot be created (its
// ReplicaFailure condition: a quota exceeded), and, for a wake-up (from
// 0, or from below replicas.min), a dependency that does not exist — it
// would never have ready replicas, and the Schedule would wait for it
// asleep for ever. The plan holds the change with this reason instead of
// writing a count nothing can reach, or waiting without a word. A
// dependency that could not be read is not one that does not exist: it
// is only not ready.
func blocked(s *spec.Schedule, w addrs.Object, obs engine.Observation) string {
	o := obs.Objects[w]
	var why []string
	if msg, failed := workload.ReplicaFailed(o); failed && w.Kind == workload.Deployment {
		why = append(why, "its pods cannot be created (ReplicaFailure: "+msg+")")
	}
	if cur := current(o); cur == 0 || cur < s.Spec.Replicas.Min {
		var missing []string
		for _, d := range s.Spec.DependsOn {
			da := dependency(w, d)
			if _, failed := obs.Failed[da]; !failed && !obs.Objects[da].Exists {
				missing = append(missing, da.String())
			}
		}
		if len(missing) > 0 {
			why = append(why, "dependsOn "+strings.Join(missing, ", ")+" not found (dependsOn names workloads, not specs): the wake-up waits for it to exist")
		}
	}
	return strings.Join(why, "; ")
}
