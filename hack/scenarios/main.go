// Command scenarios writes the control-quality scenario suite under
// testdata/scenarios: one directory per scenario, each with an Environment
// of its own (a sim world with one workload shaped like the shipped
// checkout), a copy of the shipped checkout NFR, and its trace. The rate traces are
// generated here, one row a second, deterministically (the on/off bursts
// from a fixed seed), so running it again writes the same files.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

const hour = 3600

// scenario is one directory: its name, what it is, and either a rate a
// second or the shipped trace with a shift.
type scenario struct {
	name, about string
	rate        func(s int) float64
	// shipped: replay the shipped arrival trace as the demo's checkout does,
	// with this shift.
	shift string
}

func scenarios() []scenario {
	return []scenario{
		{name: "diurnal", about: "a day's rise and fall in an hour: 100 → 500 → 150 req/s along a half sine",
			rate: func(s int) float64 {
				x := float64(s) / hour
				base := 100 + 50*x // the ends: 100 at the start, 150 at the end
				return base + (500-125)*math.Sin(math.Pi*x)
			}},
		{name: "flash-crowd", about: "200 req/s, ×4 within 30 s at minute 20 for 5 minutes, then back within 30 s",
			rate: func(s int) float64 {
				const up, top, down = 20 * 60, 20*60 + 30, 25 * 60
				switch {
				case s < up:
					return 200
				case s < top:
					return 200 + 600*float64(s-up)/30
				case s < down:
					return 800
				case s < down+30:
					return 800 - 600*float64(s-down)/30
				}
				return 200
			}},
		{name: "on-off", about: "100 req/s with bursts to 600 req/s of 1–3 minutes at exponential gaps (mean 5 minutes), seed 1",
			rate: onOff(1)},
		{name: "heavy-tail", about: "100 req/s with bursts of 30–150 s at exponential gaps (mean 4 minutes), each 250 × a Pareto(1.5) draw req/s above it (at most 1,400), seed 6",
			rate: heavyTail(6)},
		{name: "decline", about: "500 → 100 req/s, linearly",
			rate: func(s int) float64 { return 500 - 400*float64(s)/(hour-1) }},
		{name: "shipped-5m", about: "the shipped trace as the demo's checkout replays it, each superposed copy shifted by up to ±5 minutes",
			shift: "5m"},
	}
}

// onOff is a rate of 100 req/s with bursts to 600: each burst lasts 60 to
// 180 s (uniform), and the gap before it is exponential with a mean of
// 300 s.
func onOff(seed uint64) func(int) float64 {
	rng := rand.New(rand.NewPCG(seed, 0x0f0f))
	on := make([]bool, hour)
	for t := rng.ExpFloat64() * 300; t < hour; {
		d := 60 + rng.Float64()*120
		for s := int(t); s < min(hour, int(t+d)); s++ {
			on[s] = true
		}
		t += d + rng.ExpFloat64()*300
	}
	return func(s int) float64 {
		if on[s] {
			return 600
		}
		return 100
	}
}

// heavyTail is a rate of 100 req/s with bursts whose size is heavy-tailed:
// each lasts 30 to 150 s (uniform) and adds 250/U^(1/1.5) req/s (U uniform
// in (0, 1]: a Pareto draw of index 1.5, so half the bursts add under
// 400 req/s and one in twenty over 1,100), capped at 1,400; the gap before
// each is exponential with a mean of 240 s. It is burstier than onOff at
// the minute scale: the size of the next burst says little about the one
// after it.
func heavyTail(seed uint64) func(int) float64 {
	rng := rand.New(rand.NewPCG(seed, 0x0f0f))
	add := make([]float64, hour)
	for t := rng.ExpFloat64() * 240; t < hour; {
		d := 30 + rng.Float64()*120
		h := min(1400, 250/math.Pow(1-rng.Float64(), 1/1.5))
		for s := int(t); s < min(hour, int(t+d)); s++ {
			add[s] = h
		}
		t += d + rng.ExpFloat64()*240
	}
	return func(s int) float64 { return 100 + add[s] }
}

func main() {
	out := flag.String("out", "testdata/scenarios", "directory to write the scenarios into")
	specs := flag.String("specs", "specs", "the shipped spec directory: its checkout NFR, and its trace with the trace's README")
	flag.Parse()
	for _, sc := range scenarios() {
		if err := write(filepath.Join(*out, sc.name), sc, *specs); err != nil {
			log.Fatal(err)
		}
	}
}

func write(dir string, sc scenario, specs string) error {
	traces := filepath.Join(specs, "traces")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	traceLine := "trace: rate.csv"
	if sc.rate != nil {
		var b bytes.Buffer
		b.WriteString("second,rate\n")
		for s := range hour {
			fmt.Fprintf(&b, "%d,%.2f\n", s, sc.rate(s))
		}
		if err := os.WriteFile(filepath.Join(dir, "rate.csv"), b.Bytes(), 0o644); err != nil {
			return err
		}
	} else {
		tdir := filepath.Join(dir, "traces")
		if err := os.MkdirAll(tdir, 0o755); err != nil {
			return err
		}
		// The trace with its attribution beside it, as its licence asks.
		for _, f := range []string{"azure-llm-conv-2023.csv", "README.md"} {
			b, err := os.ReadFile(filepath.Join(traces, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tdir, f), b, 0o644); err != nil {
				return err
			}
		}
		traceLine = "trace: traces/azure-llm-conv-2023.csv\n        rateScale: 80\n        shift: " + sc.shift
	}
	share := ""
	if sc.rate == nil {
		share = "\n            share: 0.7"
	}
	env := strings.NewReplacer("NAME", sc.name, "ABOUT", sc.about, "TRACE", traceLine, "SHARE", share).Replace(envTemplate)
	if err := os.WriteFile(filepath.Join(dir, "setpoint.yaml"), []byte(env), 0o644); err != nil {
		return err
	}
	// The shipped checkout NFR, as it is but for its editor modeline (its
	// schema's path is relative to specs/).
	nfr, err := os.ReadFile(filepath.Join(specs, "checkout.nfr.yaml"))
	if err != nil {
		return err
	}
	if first, rest, ok := bytes.Cut(nfr, []byte("\n")); ok && bytes.HasPrefix(first, []byte("# yaml-language-server:")) {
		nfr = rest
	}
	return os.WriteFile(filepath.Join(dir, "checkout.nfr.yaml"), nfr, 0o644)
}

const envTemplate = `# Scenario NAME: ABOUT.
# Written by hack/scenarios (make scenarios); make bench-control replays it.
apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: NAME}
spec:
  providers:
    - name: sim
      config:
        TRACE
        seed: 1
        workloads:
          - kind: Deployment
            namespace: shop
            name: checkout
            replicas: 2
            hpa: {min: 2, max: 50, targetCPU: 70%}
            perPodRPS: 120
            cpuPerRequest: 4m
            startup: 20s
            serviceTime: 40msSHARE
            containers:
              - {name: function, request: 256Mi, limit: 512Mi, workingSet: 110Mi}
            managers: {spec.minReplicas: kubectl-client-side-apply}
  signals: {default: embedded}
  state: {backend: file, path: .setpoint/state.json}
  tick: 5s
`
