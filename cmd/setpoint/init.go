package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/specs"
)

func newInitCmd() *cobra.Command {
	var provider string
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a starting spec directory that validates and plans as written",
		Long: `init writes, in DIR (default: the current directory), a starting directory:
an Environment, one NFR with every field commented, and a .gitignore for the
state. With --provider sim (the default) the Environment is the sim world
replaying the shipped production trace (copied beside it, with its
attribution): it plans and applies with nothing else installed. With
--provider kubernetes it names your cluster (the kubeconfig's current
context) and a Prometheus to read signals from; the NFR starts in observe
mode, so a plan says what it would do and an apply changes nothing.
init never overwrites: if any file it would write exists, it writes none.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			files, err := starterFiles(provider)
			if err != nil {
				return err
			}
			if err := writeNew(dir, files); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Wrote a starting directory in %s:\n", dir)
			for _, name := range slices.Sorted(maps.Keys(files)) {
				fmt.Fprintf(out, "  %s\n", name)
			}
			fmt.Fprintf(out, "\nNext:\n  setpoint validate %[1]s\n  setpoint plan %[1]s\n", dir)
			if provider == "sim" {
				fmt.Fprintf(out, "  setpoint sim --baseline %s   # the whole trace on virtual time, against the HPA alone\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "sim", "sim (the simulated world, replaying the shipped trace) or kubernetes (your cluster)")
	return cmd
}

// writeNew writes the files under dir, creating what directories they
// need, and none of them if any exists already.
func writeNew(dir string, files map[string][]byte) error {
	var there []string
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			there = append(there, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if len(there) > 0 {
		slices.Sort(there)
		return fmt.Errorf("not writing over what is in %s: %s (init writes only into a directory without them)", dir, strings.Join(there, ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		// O_EXCL: a file made since the check above is not written over.
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
		_, werr := f.Write(files[name])
		if err := errors.Join(werr, f.Close()); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// starterFiles are the files init writes for a provider.
func starterFiles(provider string) (map[string][]byte, error) {
	files := map[string][]byte{".gitignore": []byte("# setpoint's state when it is kept in a file (state.backend: file)\n.setpoint/\n")}
	switch provider {
	case "sim":
		files["setpoint.yaml"] = []byte(schemaLine("environment") + simEnvironment)
		files["web.nfr.yaml"] = []byte(schemaLine("nfr") + starterNFR("shop", "enforce"))
		files["traces/"+specs.TraceName] = specs.Trace
		files["traces/README.md"] = specs.TraceReadme
	case "kubernetes":
		files["setpoint.yaml"] = []byte(schemaLine("environment") + kubernetesEnvironment)
		files["web.nfr.yaml"] = []byte(schemaLine("nfr") + starterNFR("default", "observe"))
	default:
		return nil, fmt.Errorf("--provider %q: want sim or kubernetes", provider)
	}
	return files, nil
}

// schemaLine is the yaml-language-server modeline of a kind: editors
// complete and check the file against the kind's JSON Schema.
func schemaLine(kind string) string {
	return "# yaml-language-server: $schema=https://raw.githubusercontent.com/setpoint-dev/setpoint/main/schemas/" + kind + ".json\n"
}

const simEnvironment = `# The Environment: where setpoint acts and reads its signals. This one is the
# sim world: a simulated cluster serving a real production trace (traces/),
# so everything here plans and applies with nothing else installed.
apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: start}
spec:
  providers:
    - name: sim
      config:
        trace: traces/` + "azure-llm-conv-2023.csv" + `
        rateScale: 60        # the trace averages 5.5 req/s: this makes it ~330
        start: 10m           # plan as of 10 minutes into the trace
        seed: 1
        # Every workload a spec targets is declared here (an NFR on one
        # that is not is noted "does not exist"); docs/sim.md has the fields.
        workloads:
          - kind: Deployment
            namespace: shop
            name: web
            replicas: 2
            hpa: {min: 2, max: 30, targetCPU: 70%}
            perPodRPS: 120       # what one pod serves before queueing
            cpuPerRequest: 4m
            startup: 20s
            serviceTime: 40ms    # an idle pod's p99 is about 40ms × ln 100 = 184ms: a lower target cannot be met
            containers:
              - {name: app, request: 256Mi, limit: 512Mi, workingSet: 110Mi}
  state: {backend: file, path: .setpoint/state.json}
`

const kubernetesEnvironment = `# The Environment: where setpoint acts and reads its signals. This one is
# your cluster, through the kubeconfig's current context (--kubeconfig to
# choose another), and a Prometheus that scrapes your workloads' request
# metrics, CPU (cAdvisor) and kube-state-metrics.
apiVersion: setpoint.dev/v1alpha1
kind: Environment
metadata: {name: start}
spec:
  providers: [{name: kubernetes}]
  signals:
    default: prometheus
    prometheus: {url: "http://prometheus.monitoring.svc:9090"}   # yours
  # From a laptop the state is a file here; setpoint running in the cluster
  # (deploy/) keeps it in the cluster: state: {backend: kubernetes}.
  state: {backend: file, path: .setpoint/state.json}
`

// starterNFR is the one NFR init writes, on Deployment web of namespace
// ns, its replicas in the mode given.
func starterNFR(ns, mode string) string {
	return `# An NFR says what a service needs; setpoint works out the replicas and the
# memory that meet it, from live signals, and says why with the numbers.
apiVersion: setpoint.dev/v1alpha1
kind: NFR
metadata: {name: web, namespace: ` + ns + `}
spec:
  target: {kind: Deployment, name: web}   # with an HPA, setpoint raises its minReplicas
  # The rate sized for is the largest of the measured rate, the recent peak
  # and half of minRPS (throughput.floor: 50%): a floor for quiet hours.
  throughput: {minRPS: 400}
  cpuPerPod: 500m                         # what one pod may use
  latency: {p99: 250ms}                   # the 99th percentile it must stay under
  memory: {headroom: 1.2, limitFactor: 1.5, window: 30m}   # request = working set × 1.2; limit = request × 1.5
  enforcement:
    replicas: ` + mode + `                     # off | observe (plan only) | enforce (apply)
    memory: observe
  # Safety: one apply moves replicas by at most 30% ("2 → 3 (wanted 6)"
  # is a step toward 6). An increase is applied at once, the next step as
  # soon as the last is; a decrease waits for its recommendation to hold 3
  # minutes, and 2 more after the last apply.
  safety: {stability: 3m, cooldown: 2m, maxReplicaStep: 30%, maxReplicas: 30}
`
}
