package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"

	"github.com/setpoint-dev/setpoint/engine/addrs"
	"github.com/setpoint-dev/setpoint/engine/decide/nodepolicy"
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
			if args[0] != ebpf.Name && args[0] != nri.Name {
				return fmt.Errorf("no node agent %q: the agents are ebpf and nri", args[0])
			}
			if node == "" {
				return errors.New("--node is required (in a DaemonSet: the downward API's spec.nodeName)")
			}
			if args[0] == nri.Name {
				if nriCfg.Cache == "" {
					return errors.New("--cache is required: the agent's cache is how a restarted agent re-derives the node's assignments")
				}
				if nriCfg.Topology != "" {
					if _, err := nodepolicy.ParseTopology(nriCfg.Topology); err != nil {
						return err
					}
				}
			}
			if every < 100*time.Millisecond || refresh < every {
				return fmt.Errorf("--every %s, --refresh %s: want every ≥ 100ms and refresh ≥ every", every, refresh)
			}
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
	f.StringVar(&cfg.Cgroup, "cgroup", "/sys/fs/cgroup", "the cgroup2 directory whose connects are routed")
	f.StringVar(&cfg.PinDir, "pin-dir", "/sys/fs/bpf/setpoint", "where the dataplane is pinned (in a bpffs); empty: not pinned")
	f.IntVar(&cfg.Groups, "groups", ebpf.DefaultGroups, "route groups the maps hold")
	f.IntVar(&cfg.Slots, "slots", ebpf.DefaultSlots, "the largest table")
	f.StringSliceVar(&cfg.Allow, "allow", nil, "prefixes VIPs and backends may be in (default 127.0.0.0/8)")
	f.StringVar(&nriCfg.Socket, "socket", nri.DefaultSocket, "nri: the runtime's NRI socket")
	f.StringVar(&nriCfg.PluginIdx, "plugin-idx", nri.DefaultPluginIdx, "nri: the plugin's place among the runtime's plugins")
	f.StringVar(&nriCfg.Topology, "topology", "", "nri: sockets×cores×threads standing for the node's (default: read from sysfs)")
	f.StringVar(&nriCfg.Cache, "cache", "/var/lib/setpoint/nri-cache.json", "nri: where the agent's cache persists")
	f.StringVar(&nriCfg.CgroupRoot, "cgroup-root", nri.DefaultCgroupRoot, "nri: where the cgroup file systems are mounted (containers' working sets are read there)")
	f.StringVar(&nriCfg.WorkingSetEvery, "working-set-every", nri.DefaultWorkingSetEvery.String(), "nri: how often containers' working sets are read (0s: never)")
	return cmd
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
