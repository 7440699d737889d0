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
			fmt.Fprintf(out, "Wrote a starting directory in %q:\n", dir)
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

// initHook, set by tests, runs before each file init writes and before
// each entry it moves into place: its error stops init there, as a full
// disk would, so a test shows that a failure midway leaves nothing.
var initHook func(path string) error

func initStep(path string) error {
	if initHook == nil {
		return nil
	}
	return initHook(path)
}

// writeNew writes the files under dir, all or none of them, and none over
// anything that exists. They are written into a temporary directory on
// the same filesystem (inside dir, or beside the first of its directories
// that does not exist) and moved into place only once every one is
// written, so a failure leaves dir as it was and a re-run works. No
// symbolic link inside dir is followed: one could lead anywhere.
func writeNew(dir string, files map[string][]byte) (err error) {
	base, missing, err := existingAncestor(dir)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		if err := checkTargets(dir, files); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp(base, ".setpoint-init-")
	if err != nil {
		return fmt.Errorf("making a temporary directory in %q: %w", base, err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the temporary directory %q: %w", tmp, rerr))
		}
	}()
	root := filepath.Join(append([]string{tmp}, missing...)...)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		// Errors name the file's place, not the temporary one.
		path, dest := filepath.Join(root, name), filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("writing %q: %w", dest, err)
		}
		if err := initStep(path); err != nil {
			return fmt.Errorf("writing %q: %w", dest, err)
		}
		if err := writeExcl(path, files[name]); err != nil {
			return fmt.Errorf("writing %q: %w", dest, err)
		}
	}
	if len(missing) > 0 {
		// dir did not exist: its first missing directory, whole, takes
		// its place in one rename.
		from, to := filepath.Join(tmp, missing[0]), filepath.Join(base, missing[0])
		if err := initStep(to); err != nil {
			return fmt.Errorf("moving the files into %q: %w", to, err)
		}
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("moving the files into %q: %w", to, err)
		}
		return nil
	}
	var moved []string
	if err := moveInto(tmp, dir, &moved); err != nil {
		// Only what was moved in is removed: nothing was there before.
		for _, p := range slices.Backward(moved) {
			if rerr := os.RemoveAll(p); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing %q, written before the failure: %w", p, rerr))
			}
		}
		return err
	}
	return nil
}

// writeExcl writes a new file; O_EXCL: nothing is written over.
func writeExcl(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}

// existingAncestor splits dir into the nearest directory on its path that
// exists and the names below it that do not (none when dir exists). dir
// is the user's to name, so a symbolic link on its path is followed; one
// to nothing is not replaced.
func existingAncestor(dir string) (base string, missing []string, err error) {
	p := filepath.Clean(dir)
	var below error // why the name under p could not be looked at
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return "", nil, fmt.Errorf("%q exists and is not a directory", p)
			}
			if below != nil && !errors.Is(below, fs.ErrNotExist) {
				return "", nil, fmt.Errorf("looking at %q: %w", dir, below)
			}
			return p, missing, nil
		}
		if _, lerr := os.Lstat(p); lerr == nil && errors.Is(err, fs.ErrNotExist) {
			return "", nil, fmt.Errorf("%q is a symbolic link to nothing: init does not write over it", p)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", nil, fmt.Errorf("looking at %q: %w", dir, err)
		}
		below = err
		missing = append([]string{filepath.Base(p)}, missing...)
		p = parent
	}
}

// checkTargets refuses, before anything is written, the files that exist
// already and a directory on their way that is a symbolic link or not a
// directory.
func checkTargets(dir string, files map[string][]byte) error {
	var there []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		parts := strings.Split(name, "/")
		p, absent := dir, false
		for _, part := range parts[:len(parts)-1] {
			p = filepath.Join(p, part)
			fi, err := os.Lstat(p)
			if errors.Is(err, fs.ErrNotExist) {
				absent = true
				break
			}
			if err != nil {
				return fmt.Errorf("looking at %q: %w", p, err)
			}
			if err := refuseEntry(p, fi); err != nil {
				return err
			}
		}
		if absent {
			continue
		}
		if _, err := os.Lstat(filepath.Join(p, parts[len(parts)-1])); err == nil {
			there = append(there, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("looking at %q: %w", filepath.Join(p, parts[len(parts)-1]), err)
		}
	}
	if len(there) > 0 {
		return fmt.Errorf("not writing over what is in %q: %s (init writes only into a directory without them)", dir, strings.Join(there, ", "))
	}
	return nil
}

// refuseEntry says why init cannot write into the existing p, or nil when
// p is a directory.
func refuseEntry(p string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%q is a symbolic link: init does not follow one inside the directory it writes (it could lead outside)", p)
	case !fi.IsDir():
		return fmt.Errorf("%q exists and is not a directory", p)
	}
	return nil
}

// moveInto moves the entries of src into dst, appending to moved each
// path it puts there. A directory dst lacks is moved whole; one it has is
// entered, unless it is a symbolic link. Files are linked rather than
// renamed where the filesystem allows: a link, unlike a rename, refuses
// to replace a file made since checkTargets looked.
func moveInto(src, dst string, moved *[]string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading %q: %w", src, err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := initStep(to); err != nil {
			return fmt.Errorf("moving %q into place: %w", to, err)
		}
		fi, err := os.Lstat(to)
		switch {
		case err == nil && e.IsDir():
			if err := refuseEntry(to, fi); err != nil {
				return err
			}
			if err := moveInto(from, to, moved); err != nil {
				return err
			}
			continue
		case err == nil:
			return fmt.Errorf("not writing over %q, made while init ran", to)
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("looking at %q: %w", to, err)
		}
		if e.IsDir() {
			err = os.Rename(from, to)
		} else if err = os.Link(from, to); err != nil && !errors.Is(err, fs.ErrExist) {
			err = os.Rename(from, to) // a filesystem without hard links
		}
		if err != nil {
			return fmt.Errorf("moving %q into place: %w", to, err)
		}
		*moved = append(*moved, to)
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
