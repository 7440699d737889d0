package main

import (
	"encoding/json"
	"errors"
	"fmt"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/confine"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// trustFlags widen what a spec directory may name. Both are off by
// default: specs arrive in pull requests, and nothing a pull request can
// change may read or write outside its directory, or choose a binary to
// run. They are flags, not spec fields, for the same reason.
type trustFlags struct {
	// outsidePaths lets spec paths (state.path, the sim trace) resolve
	// outside the spec directory.
	outsidePaths bool
	// specPlugins lets pluginPath entries inside the spec directory
	// (.setpoint/ included) be searched for provider binaries.
	specPlugins bool
}

var trust trustFlags

// cluster is how the kubernetes provider reaches its API server: the
// operator's choice, never a spec's.
var cluster struct {
	kubeconfig, context string
	inCluster           bool
}

// kubernetesConfig is the kubernetes provider's configuration from the
// flags (and $KUBECONFIG, read by the provider as kubectl does).
func kubernetesConfig() ([]byte, error) {
	kc := k8sprov.Config{Context: cluster.context, InCluster: cluster.inCluster}
	if cluster.kubeconfig != "" {
		abs, err := filepath.Abs(cluster.kubeconfig)
		if err != nil {
			return nil, err
		}
		kc.Kubeconfig = abs
	}
	return json.Marshal(kc)
}

// promCreds are the Prometheus server's credentials, from flags.
var promCreds promsource.Config

func addTrustFlags(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&promCreds.BearerTokenFile, "prometheus-bearer-token-file", "", "a file holding the bearer token for the Environment's Prometheus server")
	cmd.PersistentFlags().StringVar(&promCreds.Username, "prometheus-username", "", "basic auth user for the Prometheus server")
	cmd.PersistentFlags().StringVar(&promCreds.PasswordFile, "prometheus-password-file", "", "a file holding the basic auth password for the Prometheus server")
	cmd.PersistentFlags().StringVar(&promCreds.CAFile, "prometheus-ca-file", "", "CA certificates that verify the Prometheus server")
	cmd.PersistentFlags().StringVar(&promCreds.CertFile, "prometheus-cert-file", "", "client certificate for the Prometheus server")
	cmd.PersistentFlags().StringVar(&promCreds.KeyFile, "prometheus-key-file", "", "client key for the Prometheus server")
	cmd.PersistentFlags().StringVar(&cluster.kubeconfig, "kubeconfig", "", "the kubeconfig of the kubernetes provider (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.PersistentFlags().StringVar(&cluster.context, "context", "", "the kubeconfig context of the kubernetes provider (default: its current context)")
	cmd.PersistentFlags().StringVar(&stateNamespace, "state-namespace", "", "namespace of the state when the Environment keeps it in the cluster (state.backend: kubernetes; default: the pod's namespace in the cluster, else setpoint-system)")
	cmd.PersistentFlags().BoolVar(&cluster.inCluster, "in-cluster", false, "the kubernetes provider uses the pod's service account (setpoint runs in the cluster)")
	cmd.PersistentFlags().BoolVar(&trust.outsidePaths, "allow-outside-paths", false, "let paths in specs (state.path, the sim trace) resolve outside the spec directory")
	cmd.PersistentFlags().BoolVar(&trust.specPlugins, "allow-spec-plugins", false, "search pluginPath entries inside the spec directory for provider binaries")
}

// envPaths are the paths an Environment names, resolved and checked.
type envPaths struct {
	state string // the engine's state file
	trace string // the sim world's trace ("" without a sim provider)
	// workloadTraces are the sim workloads' own traces, by index (""
	// for a workload replaying the config's).
	workloadTraces []string
	// plugins are the pluginPath entries searched; refused are those left
	// out because they lie inside the spec directory.
	plugins, refused []string
}

// outsideHint is what a user can do about a path outside the directory.
const outsideHint = "a path inside the spec directory, or --allow-outside-paths to trust this directory's specs"

// resolveEnvPaths resolves every path an Environment names against the
// Environment's directory and checks each against the spec directory
// root. Problems are diagnostics at the field that names the path; no
// file is opened, so nothing of a file's content can reach a message.
func resolveEnvPaths(root confine.Root, env *spec.Environment, t trustFlags) (envPaths, load.Diagnostics) {
	var out envPaths
	var diags load.Diagnostics
	base := filepath.Dir(env.Src.Pos.File)
	report := func(field, what string, err error) {
		d := load.Diagnostic{Pos: env.Src.PosOf(field), Path: field}
		var oe *confine.OutsideError
		if errors.As(err, &oe) {
			d.Message, d.Expected = fmt.Sprintf("%s %s", what, oe.Error()), outsideHint
		} else {
			d.Message = fmt.Sprintf("%s: %v", what, err)
		}
		diags = append(diags, d)
	}
	checkIn := func(root confine.Root, field, what, p string) string {
		res, err := root.Inside(base, p)
		if err != nil {
			var oe *confine.OutsideError
			if !errors.As(err, &oe) || !t.outsidePaths {
				report(field, what, err)
				return ""
			}
		}
		return res
	}
	check := func(field, what, p string) string { return checkIn(root, field, what, p) }

	statePath := env.Spec.State.Path
	if statePath == "" {
		statePath = ".setpoint/state.json"
	}
	stateRoot := root
	out.state = check("spec.state.path", "state.path", statePath)
	if link := swapLink(root, base); link != "" && out.state != "" && confine.Within(root.Dir, out.state) {
		// The next swap deletes the tree the link leads to, and the state
		// with it: setpoint's own .setpoint/ is kept beside the link
		// instead; any other path there is the repository's, so refused.
		home, moved, ok := besideLink(link, root.Dir, out.state)
		switch {
		case ok:
			r, err := confine.NewRoot(home)
			if err != nil {
				report("spec.state.path", "state.path's directory beside the link", err)
				out.state = ""
				break
			}
			stateRoot = r
			out.state = checkIn(stateRoot, "spec.state.path", "state.path", moved)
		case env.Spec.State.Backend != "kubernetes":
			diags = append(diags, load.Diagnostic{Pos: env.Src.PosOf("spec.state.path"), Path: "spec.state.path",
				Message: fmt.Sprintf("state.path %q resolves to %q, inside %q where the symlink %q leads: the next swap of the link deletes it (and the lock with it)",
					statePath, out.state, root.Dir, link),
				Expected: fmt.Sprintf("a state.path under .setpoint/ (kept beside the link, in %q), a path outside the link's target with --allow-outside-paths, or state.backend: kubernetes", home)})
			out.state = ""
		}
	}
	if out.state != "" {
		// What is kept beside the state file is judged as the file is: a
		// link planted there must not send a write (the lock is truncated,
		// shards are created) outside the directory.
		for _, derived := range append(state.FilesBeside(out.state), sim.FilesBeside(out.state)...) {
			if checkIn(stateRoot, "spec.state.path", "state.path's "+filepath.Base(derived), derived) == "" {
				out.state = ""
				break
			}
		}
	}

	for i, p := range env.Spec.Providers {
		switch p.Name {
		case "sim":
			cfg, err := sim.Config(env)
			if err != nil {
				report(fmt.Sprintf("spec.providers.%d.config", i), "sim config", err)
				continue
			}
			out.trace = check(fmt.Sprintf("spec.providers.%d.config.trace", i), "trace", cfg.Trace)
			out.workloadTraces = make([]string, len(cfg.Workloads))
			for j, wl := range cfg.Workloads {
				if wl.Trace != "" {
					out.workloadTraces[j] = check(fmt.Sprintf("spec.providers.%d.config.workloads.%d.trace", i, j), "trace", wl.Trace)
				}
			}
		case "kubernetes":
			var kc spec.KubernetesConfig
			if json.Unmarshal(p.Config, &kc) != nil {
				continue
			}
			// Credentials, and which of them is used, are the operator's,
			// never the pull request's.
			for _, c := range []struct {
				field, what, expected string
				set                   bool
			}{
				{"kubeconfig", "a kubeconfig path", "the --kubeconfig flag or $KUBECONFIG of the setpoint process", kc.Kubeconfig != ""},
				{"context", "a kubeconfig context", "the --context flag or the kubeconfig's current context", kc.Context != ""},
			} {
				if c.set {
					f := fmt.Sprintf("spec.providers.%d.config.%s", i, c.field)
					diags = append(diags, load.Diagnostic{Pos: env.Src.PosOf(f), Path: f, Message: c.what + " cannot come from a spec", Expected: c.expected})
				}
			}
		}
	}

	// A pull request can add files anywhere in its repository, not only
	// in the spec directory: plugins are refused from the whole work tree.
	untrusted := repoRoot(root.Dir)
	for _, p := range env.Spec.PluginPath {
		res, err := confine.Resolve(base, p)
		if err != nil {
			// A plugin directory that cannot be resolved holds no plugin.
			continue
		}
		if confine.Within(untrusted, res) && !t.specPlugins {
			out.refused = append(out.refused, res)
			continue
		}
		out.plugins = append(out.plugins, res)
	}
	return out, diags
}

// swapLink is the spec directory as named (the Environment's directory
// or one above it, resolving to root) when it is a symlink, as git-sync's
// link is: each publish points it at a new tree and deletes the old one.
// "" when the directory is no link: a symlink above it (macOS's /tmp) is
// not swapped by anyone.
func swapLink(root confine.Root, base string) string {
	d, err := filepath.Abs(base)
	if err != nil {
		return ""
	}
	for {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || !confine.Within(root.Dir, real) {
			return ""
		}
		if real == root.Dir {
			if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				return d
			}
			return ""
		}
		up := filepath.Dir(d)
		if up == d {
			return ""
		}
		d = up
	}
}

// besideLink moves a state path under the link's target into the
// .setpoint directory beside the link: home, and the path in it. ok is
// false for a path that is not under a .setpoint directory.
func besideLink(link, target, res string) (home, moved string, ok bool) {
	home = filepath.Join(filepath.Dir(link), ".setpoint")
	rel, err := filepath.Rel(target, res)
	if err != nil {
		return home, "", false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	i := slices.Index(parts, ".setpoint")
	if i < 0 || i == len(parts)-1 {
		return home, "", false
	}
	return home, filepath.Join(append([]string{home}, parts[i+1:]...)...), true
}

// repoRoot is the top of the git work tree holding dir (a directory with
// a .git entry), or dir itself outside one.
func repoRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return dir
		}
		d = up
	}
}

// specRoot is the spec directory a document was loaded under: the first
// directory argument holding it, or the directory of a file argument.
func specRoot(args []string, file string) (confine.Root, error) {
	for _, a := range args {
		r, err := confine.NewRoot(a)
		if err != nil {
			continue
		}
		if f, err := confine.Resolve(".", file); err == nil && confine.Within(r.Dir, f) && r.Dir != f {
			return r, nil
		}
	}
	return confine.NewRoot(filepath.Dir(file))
}
