package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/values"
)

// The benchmarks write to a temporary directory, or under
// $SETPOINT_BENCH_DIR when set (to measure another disk).
func benchDir(b *testing.B) string {
	if d := os.Getenv("SETPOINT_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "statebench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return b.TempDir()
}

var (
	benchReplicas = addrs.MustPath("spec.minReplicas")
	benchMemory   = addrs.MustPath("spec.template.spec.containers[name=app].resources.requests.memory")
)

func benchObject(i int) addrs.Object {
	return addrs.Object{Provider: "kubernetes", Kind: "Deployment", Namespace: fmt.Sprintf("team-%03d", i%500), Name: fmt.Sprintf("service-%05d", i)}
}

// fillObject gives object i the two attributes a typical NFR target has:
// replicas and memory, each with the user's value, an applied value and
// the NFR policy's window.
func fillObject(s *State, i, gen int) {
	o := benchObject(i)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(gen) * time.Minute)
	by := []string{"NFR/" + o.Namespace + "/" + o.Name}
	r := s.Entry(addrs.Attr{Object: o, Path: benchReplicas})
	u := values.CountOf(2)
	r.User = &u
	r.Applied = &Applied{Value: values.CountOf(int64(3 + gen)), At: at, By: by}
	r.Policy = map[string]json.RawMessage{"nfr": json.RawMessage(fmt.Sprintf(`{"window":{"openedAt":%q,"anchor":{"type":"count","value":"%d"}},"cooldownUntil":%q}`,
		at.Format(time.RFC3339), 3+gen, at.Add(2*time.Minute).Format(time.RFC3339)))}
	m := s.Entry(addrs.Attr{Object: o, Path: benchMemory})
	mu := values.BytesOf(256 << 20)
	m.User = &mu
	m.Applied = &Applied{Value: values.BytesOf(int64(192+16*(gen%4)) << 20), At: at, By: by}
	m.Policy = map[string]json.RawMessage{"nfr": json.RawMessage(fmt.Sprintf(`{"window":{"openedAt":%q,"anchor":{"type":"bytes","value":"144Mi"}}}`, at.Format(time.RFC3339)))}
}

const benchObjects = 20000

// cpuTime reports the process's CPU time (user + system) per op beside the
// wall time: on a shared machine the wall time includes waiting for a CPU.
func cpuTime(b *testing.B) func() {
	start := rusage()
	return func() {
		b.ReportMetric(float64((rusage()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
}

func rusage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// savedState writes 20,000 objects and returns the backend and the state
// as loaded back.
func savedState(b *testing.B) (Backend, *State) {
	be := NewFile(benchDir(b) + "/.setpoint/state.json")
	s := New()
	for i := range benchObjects {
		fillObject(s, i, 0)
	}
	ctx := context.Background()
	if st, err := be.Save(ctx, s); err != nil || st.Written != benchObjects {
		b.Fatalf("initial save: %+v %v", st, err)
	}
	s, err := be.Load(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return be, s
}

// BenchmarkSave1Percent: 200 of 20,000 objects changed, then Save.
func BenchmarkSave1Percent(b *testing.B) {
	be, s := savedState(b)
	ctx := context.Background()
	const changed = benchObjects / 100
	gen := 0
	defer cpuTime(b)()
	for b.Loop() {
		b.StopTimer()
		gen++
		for j := range changed {
			fillObject(s, (gen*changed+j)%benchObjects, gen)
		}
		b.StartTimer()
		st, err := be.Save(ctx, s)
		if err != nil || st.Written != changed {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkSaveUnchanged: Save of 20,000 objects, none changed.
func BenchmarkSaveUnchanged(b *testing.B) {
	be, s := savedState(b)
	ctx := context.Background()
	defer cpuTime(b)()
	for b.Loop() {
		st, err := be.Save(ctx, s)
		if err != nil || st.Written != 0 || st.Removed != 0 {
			b.Fatalf("%+v %v", st, err)
		}
	}
}

// BenchmarkLoad20k: Load of 20,000 shards.
func BenchmarkLoad20k(b *testing.B) {
	be, _ := savedState(b)
	ctx := context.Background()
	defer cpuTime(b)()
	for b.Loop() {
		s, err := be.Load(ctx)
		if err != nil || len(s.objects) != benchObjects {
			b.Fatal(err)
		}
	}
}

// BenchmarkSave200Alone: the write half of BenchmarkSave1Percent: a state
// of only 200 objects, all changed, so the figure is the 200 atomic writes
// and the directory fsync.
func BenchmarkSave200Alone(b *testing.B) {
	be := NewFile(benchDir(b) + "/.setpoint/state.json")
	s := New()
	ctx := context.Background()
	gen := 0
	defer cpuTime(b)()
	for b.Loop() {
		b.StopTimer()
		gen++
		for i := range benchObjects / 100 {
			fillObject(s, i, gen)
		}
		b.StartTimer()
		if st, err := be.Save(ctx, s); err != nil || st.Written != benchObjects/100 {
			b.Fatalf("%+v %v", st, err)
		}
	}
}
