package schedulekind_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/engine/values"
	"github.com/setpoint-dev/setpoint/engine/watch"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/workload"
)

// BenchmarkWakeUpLatency measures, on the wall clock, how late a
// Schedule's change is applied after it becomes due: a reconcile loop on
// the watch queue plans, sees the workload go idle in 20 ms (its last
// activity is set so), is requeued for that instant, and at the queue's
// timer plans again and applies. One op is one due change; the figure is
// Apply's call minus the due time.
func BenchmarkWakeUpLatency(b *testing.B) {
	const timeout = time.Minute
	a, d := deployment("shop", "api", 2, 2, nil)
	f := newFixture(b, map[addrs.Object]providers.Object{a: d}, schedule(`  target: {kind: Deployment, name: api}
  idle: {after: 1m, grace: 0s, activity: "vector(0)"}
  enforcement: {replicas: enforce}
`))
	f.objs.applied = make(chan time.Time, 1)
	q := watch.NewQueue(watch.RealClock{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var due time.Time
	// The loop hands over the time of an Apply once its reconcile is
	// over, so the next op resets nothing it still reads.
	result := make(chan time.Time)
	go func() {
		for {
			keys, ok := q.Get(ctx)
			if !ok {
				return
			}
			now := time.Now()
			p := f.e.Plan(ctx, now, f.st, nil)
			f.e.Apply(ctx, now, p, f.st)
			if at, ok := p.Due["Schedule/shop/api"]; ok && len(p.Changes) == 0 {
				q.AddAfter(keys[0], time.Until(at))
			}
			q.Done(keys...)
			select {
			case at := <-f.objs.applied:
				result <- at
			default:
			}
		}
	}()
	late := make([]time.Duration, 0, b.N)
	for i := 0; i < b.N; i++ {
		// Awake at 2 replicas, last active so that it is idle in 20 ms.
		f.st = state.New()
		act := time.Now().Add(-timeout + 20*time.Millisecond)
		o := f.objs.objs[a]
		o.Attributes = map[addrs.Path]values.Value{workload.Replicas: values.CountOf(2), workload.ReadyReplicas: values.CountOf(2)}
		o.Annotations = lastActivity(act)
		f.objs.objs[a] = o
		due = act.Add(timeout + time.Nanosecond)
		q.Add("Schedule/shop/api")
		select {
		case at := <-result:
			late = append(late, at.Sub(due))
		case <-time.After(5 * time.Second):
			b.Fatal("no apply within 5 s of the due time")
		}
	}
	b.StopTimer()
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	b.ReportMetric(float64(late[len(late)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(late[len(late)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkPlan10000Schedules is one tick of the whole loop for 10,000
// Schedules (each on its own Deployment, half of them depending on a
// neighbour, one trigger each, two wake-ups and two time-of-day timeouts
// in Europe/Paris): reads, the groups' 0→N decisions, the activity and
// trigger queries, intents, the gate with the behavior policy, the plan.
func BenchmarkPlan10000Schedules(b *testing.B) {
	const n = 10000
	objs := map[addrs.Object]providers.Object{}
	var docs []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("w%05d", i)
		a, d := deployment("shop", name, 1+i%3, 1+i%3, nil)
		objs[a] = d
		dep := ""
		if i%2 == 1 {
			dep = fmt.Sprintf("  dependsOn: [w%05d]\n", i-1)
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: setpoint.dev/v1alpha1
kind: Schedule
metadata: {name: %s, namespace: shop}
spec:
  target: {kind: Deployment, name: %s}
  replicas: {min: 0, atStart: 1, max: 10}
  idle: {after: 5m, grace: 0s}
%s  timeZone: Europe/Paris
  wakeUp: ["08:00", "13:30"]
  idleAfterByTime: [{from: "08:00", after: 30m}, {from: "19:00", after: 5m}]
  triggers: [{name: rps, query: 'sum(rate(gateway_requests_total{service="%s"}[1m]))', target: 10}]
  enforcement: {replicas: enforce}
`, name, name, dep, name))
	}
	// One file per 100 documents.
	var files []string
	for i := 0; i < n; i += 100 {
		files = append(files, strings.Join(docs[i:i+100], "---\n"))
	}
	f := newFixture(b, objs, files...)
	f.e.NoDryRun = true
	now := t0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := f.e.Plan(context.Background(), now, state.New(), nil)
		if len(p.Errors) > 0 {
			b.Fatalf("errors: %v", p.Errors[0])
		}
	}
}
