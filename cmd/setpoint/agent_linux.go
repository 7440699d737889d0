package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/bpf/dataplane"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
	"github.com/setpoint-dev/setpoint/engine/decide/routegroup"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/ebpf"
	"github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/agentcr"
	"github.com/setpoint-dev/setpoint/providers/nodeagent"
	"github.com/setpoint-dev/setpoint/providers/noderes"
	"github.com/setpoint-dev/setpoint/providers/nri"
	"github.com/setpoint-dev/setpoint/providers/route"
)

// newAgentCmd runs a node agent as a DaemonSet's pod: the provider in this
// process, configured from the NodeAgentConfigs that select its node.
func newAgentCmd() *cobra.Command {
	var node, namespace, kubeconfig string
	var every, refresh time.Duration
	var cfg ebpf.Config
	var nriCfg nri.Config
	cmd := &cobra.Command{
		Use:   "agent ebpf|nri --node NAME",
		Short: "Run a node agent (eBPF or NRI) from the cluster's NodeAgentConfigs (a DaemonSet's pod)",
		Long: `agent runs the eBPF or NRI provider on this node and reconciles it from every
NodeAgentConfig with that spec.agent whose nodeSelector matches the node's
labels, reporting in each one's status.nodes entry for this node.

ebpf: on SIGTERM it stops its loops and leaves the dataplane pinned (the
failsafe routes until the next agent resumes it), so a rolling update never
leaves a VIP unrouted; 'setpoint provider cleanup ebpf' detaches it for good.

nri: it plugs into the runtime's NRI socket and runs the node's NodePolicy;
its cache (--cache) lets the next agent re-derive the same assignments. On
SIGTERM containers keep the CPU sets and limits they have.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every flag is checked before the kubeconfig is read or
			// anything touches the node: a bad value says so at once.
			if err := checkAgentFlags(cmd.Flags(), args[0], node, every, refresh, cfg, nriCfg); err != nil {
				return err
			}
			limitMemory()
			rc, err := kubernetes.RestConfig(kubernetes.Config{Kubeconfig: kubeconfig, InCluster: kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != ""})
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("kubernetes client: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if args[0] == nri.Name {
				return runNRIAgent(ctx, dyn, node, namespace, every, refresh, nriCfg)
			}
			p := ebpf.New()
			raw, err := json.Marshal(cfg)
			if err != nil {
				return err
			}
			if d := p.Configure(cmd.Context(), providers.ConfigureRequest{Config: raw}); len(d) > 0 {
				return fmt.Errorf("configuring the eBPF agent: %w", errors.Join(diagErrors(d)...))
			}
			r := &agentcr.Reconciler{
				Dyn: dyn, Namespace: namespace, Node: node, Agent: nodeagent.EBPF, Provider: p,
				Object: func(ns, name string) addrs.Object {
					return addrs.Object{Provider: ebpf.Name, Kind: route.Kind, Namespace: ns, Name: name}
				},
				Attr:     route.AttrConfig,
				Observed: func(o providers.Object) any { return route.Summary(o.Attributes) },
				Key:      route.SummaryKey,
				Refresh:  refresh,
				Log:      slog.Default(),
			}
			slog.Info("eBPF node agent started", "node", node, "namespace", namespace, "cgroup", cfg.Cgroup, "pinDir", cfg.PinDir)
			r.Run(ctx, every)
			slog.Info("eBPF node agent stopping: the dataplane stays pinned for the next agent", "node", node)
			return p.Leave()
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	f.StringVar(&namespace, "namespace", "", "the namespace of the NodeAgentConfigs to take (default: all)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "a kubeconfig (default: in-cluster, else the usual kubeconfig)")
	f.DurationVar(&every, "every", 2*time.Second, "how often the NodeAgentConfigs are read")
	f.DurationVar(&refresh, "refresh", 30*time.Second, "how often an unchanged report is rewritten")
	f.StringVar(&cfg.Cgroup, "cgroup", "/sys/fs/cgroup", "ebpf: the cgroup2 directory whose connects are routed")
	f.StringVar(&cfg.PinDir, "pin-dir", "/sys/fs/bpf/setpoint", "ebpf: where the dataplane is pinned (in a bpffs); empty: not pinned")
	f.IntVar(&cfg.Groups, "groups", ebpf.DefaultGroups, fmt.Sprintf("ebpf: route groups the maps hold (1 to %d)", dataplane.MaxGroups))
	f.IntVar(&cfg.Slots, "slots", ebpf.DefaultSlots, fmt.Sprintf("ebpf: the largest table (1 to %d)", routegroup.MaxSlots))
	f.StringSliceVar(&cfg.Allow, "allow", nil, "ebpf: IPv4 prefixes VIPs and backends may be in (default 127.0.0.0/8)")
	for _, name := range []string{"cgroup", "pin-dir", "groups", "slots", "allow"} {
		_ = f.SetAnnotation(name, agentAnnotation, []string{ebpf.Name})
	}
	f.StringVar(&nriCfg.Socket, "socket", nri.DefaultSocket, "nri: the runtime's NRI socket")
	f.StringVar(&nriCfg.PluginIdx, "plugin-idx", nri.DefaultPluginIdx, "nri: the plugin's place among the runtime's plugins (two digits)")
	f.StringVar(&nriCfg.Topology, "topology", "", "nri: sockets×cores×threads standing for the node's (default: read from sysfs)")
	f.StringVar(&nriCfg.Cache, "cache", "/var/lib/setpoint/nri-cache.json", "nri: where the agent's cache persists")
	f.StringVar(&nriCfg.CgroupRoot, "cgroup-root", nri.DefaultCgroupRoot, "nri: where the cgroup file systems are mounted (containers' working sets are read there)")
	f.StringVar(&nriCfg.WorkingSetEvery, "working-set-every", nri.DefaultWorkingSetEvery.String(), "nri: how often containers' working sets are read, 1s to 1h (0s: never)")
	for _, name := range []string{"socket", "plugin-idx", "topology", "cache", "cgroup-root", "working-set-every"} {
		_ = f.SetAnnotation(name, agentAnnotation, []string{nri.Name})
	}
	return cmd
}

// agentAnnotation marks a flag only one agent takes, with that agent's
// name: given to the other agent it would be silently ignored.
const agentAnnotation = "setpoint/agent"

// checkAgentFlags checks the flags agent takes, and refuses those it does
// not, before anything reads the kubeconfig or the node. The providers
// check their configs again when they start, but there a zero means the
// default (a config file may leave a field out), and the NRI agent's
// Start skips the pluginIdx check of its Configure: a flag given is a
// value to check. Every problem is reported, not only the first.
func checkAgentFlags(f *pflag.FlagSet, agent, node string, every, refresh time.Duration, cfg ebpf.Config, nriCfg nri.Config) error {
	if agent != ebpf.Name && agent != nri.Name {
		return fmt.Errorf("no node agent %q: the agents are ebpf and nri", agent)
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	f.Visit(func(fl *pflag.Flag) {
		if only := fl.Annotations[agentAnnotation]; len(only) > 0 && only[0] != agent {
			bad("--%s is a flag of agent %s, not of agent %s", fl.Name, only[0], agent)
		}
	})
	if node == "" {
		bad("--node is required (in a DaemonSet: the downward API's spec.nodeName)")
	}
	if every < 100*time.Millisecond || refresh < every {
		bad("--every %s, --refresh %s: want every ≥ 100ms and refresh ≥ every", every, refresh)
	}
	switch agent {
	case ebpf.Name:
		if cfg.Cgroup == "" {
			bad("--cgroup is required: the cgroup2 directory whose connects are routed")
		}
		if cfg.Groups < 1 || cfg.Groups > dataplane.MaxGroups {
			bad("--groups %d: want 1 to %d", cfg.Groups, dataplane.MaxGroups)
		}
		if cfg.Slots < 1 || cfg.Slots > routegroup.MaxSlots {
			bad("--slots %d: want 1 to %d", cfg.Slots, routegroup.MaxSlots)
		}
		for _, a := range cfg.Allow {
			if p, err := netip.ParsePrefix(a); err != nil || !p.Addr().Is4() {
				bad("--allow %q: want an IPv4 prefix such as 10.0.0.0/8", a)
			}
		}
	case nri.Name:
		if nriCfg.Socket == "" {
			bad("--socket is required: the runtime's NRI socket")
		}
		if p := nriCfg.PluginIdx; len(p) != 2 || p[0] < '0' || p[0] > '9' || p[1] < '0' || p[1] > '9' {
			bad("--plugin-idx %q: want two digits, as in %q", p, nri.DefaultPluginIdx)
		}
		if nriCfg.Cache == "" {
			bad("--cache is required: the agent's cache is how a restarted agent re-derives the node's assignments")
		}
		if nriCfg.Topology != "" {
			if _, err := nodepolicy.ParseTopology(nriCfg.Topology); err != nil {
				bad("--topology: %w", err)
			}
		}
		// The bounds nri reads workingSetEvery with.
		if d, err := time.ParseDuration(nriCfg.WorkingSetEvery); err != nil || d != 0 && (d < time.Second || d > time.Hour) {
			bad("--working-set-every %q: want a duration from 1s to 1h, or 0s for none", nriCfg.WorkingSetEvery)
		}
	}
	return errors.Join(errs...)
}

// runNRIAgent runs the NRI provider from the NodeAgentConfigs with agent
// nri until ctx ends.
func runNRIAgent(ctx context.Context, dyn dynamic.Interface, node, namespace string, every, refresh time.Duration, cfg nri.Config) error {
	p := nri.New()
	if err := p.Start(cfg); err != nil {
		return fmt.Errorf("starting the NRI agent: %w", err)
	}
	r := &agentcr.Reconciler{
		Dyn: dyn, Namespace: namespace, Node: node, Agent: nodeagent.NRI, Provider: p,
		Object: func(ns, name string) addrs.Object {
			return addrs.Object{Provider: nri.Name, Kind: noderes.Kind, Namespace: ns, Name: name}
		},
		Attr:     noderes.AttrConfig,
		Observed: func(o providers.Object) any { return nri.Summary(o.Attributes) },
		Key:      nri.SummaryKey,
		Refresh:  refresh,
		Log:      slog.Default(),
	}
	slog.Info("NRI node agent started", "node", node, "namespace", namespace, "socket", cfg.Socket, "cache", cfg.Cache)
	r.Run(ctx, every)
	slog.Info("NRI node agent stopping: containers keep their CPU sets and limits", "node", node)
	return p.Shutdown()
}

func diagErrors(ds []providers.Diagnostic) []error {
	out := make([]error, len(ds))
	for i, d := range ds {
		out[i] = d
	}
	return out
}
