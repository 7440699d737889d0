package nri

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// WorkloadAnnotation on a pod names its workload when its name does not
// follow a Deployment's (name-<hash>-<suffix>).
const WorkloadAnnotation = "setpoint.dev/workload"

// Plugin is the NRI plugin: it turns the runtime's requests into the
// pipeline's events and the pipeline's updates into the runtime's
// adjustments. It never fails a container's start: a placement it cannot
// make is logged and the container runs as the runtime would run it.
type Plugin struct {
	p   *Pipeline
	log *slog.Logger

	mu   sync.Mutex
	stub stub.Stub
	// up is closed while connected and synchronized.
	up chan struct{}
}

// NewPlugin serves a pipeline.
func NewPlugin(p *Pipeline, log *slog.Logger) *Plugin {
	return &Plugin{p: p, log: log, up: make(chan struct{})}
}

// WaitSynchronized returns once the runtime synchronized the plugin (the
// node's containers are known), or ctx ends.
func (pl *Plugin) WaitSynchronized(ctx context.Context) error {
	pl.mu.Lock()
	up := pl.up
	pl.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the runtime has not synchronized the NRI plugin: %w", ctx.Err())
	}
}

// stableConnection is how long a connection must last for the reconnect
// backoff to start again from its shortest.
const stableConnection = 30 * time.Second

// Run connects to the runtime's socket as plugin idx-setpoint and stays
// connected until ctx ends, reconnecting with backoff when the runtime
// restarts (each connection begins with a Synchronize). connected, when
// set, is told of each connection.
func (pl *Plugin) Run(ctx context.Context, socket, idx string, connected func()) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		closed := make(chan struct{})
		s, err := stub.New(pl, stub.WithPluginName("setpoint"), stub.WithPluginIdx(idx), stub.WithSocketPath(socket),
			stub.WithOnClose(func() { close(closed) }))
		if err == nil {
			err = s.Start(ctx)
		}
		if err != nil {
			pl.log.Warn("connecting to the NRI socket", "socket", socket, "err", err, "retry", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		since := time.Now()
		pl.mu.Lock()
		pl.stub = s
		pl.mu.Unlock()
		if connected != nil {
			connected()
		}
		select {
		case <-ctx.Done():
			s.Stop()
		case <-closed:
			// A runtime that closes each connection at once (a plugin
			// it refuses) must not be redialled in a tight loop: the
			// backoff resets only after a connection that lasted.
			if time.Since(since) > stableConnection {
				backoff = 100 * time.Millisecond
			}
			pl.log.Warn("the runtime closed the NRI connection: reconnecting", "retry", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
		pl.mu.Lock()
		pl.stub = nil
		select {
		case <-pl.up:
			pl.up = make(chan struct{})
		default:
		}
		pl.mu.Unlock()
	}
	return nil
}

// Send applies updates the runtime's reply cannot carry.
func (pl *Plugin) Send(us []Update) ([]string, error) {
	pl.mu.Lock()
	s := pl.stub
	pl.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("not connected to the runtime: the updates go after the next synchronize")
	}
	failed, err := s.UpdateContainers(toUpdates(us))
	ids := make([]string, 0, len(failed))
	for _, f := range failed {
		ids = append(ids, f.GetContainerId())
	}
	return ids, err
}

// Synchronize takes the runtime's pods and containers.
func (pl *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, p := range pods {
		byID[p.GetId()] = p
	}
	infos := make([]CtrInfo, 0, len(ctrs))
	for _, c := range ctrs {
		pod, ok := byID[c.GetPodSandboxId()]
		if !ok {
			continue
		}
		infos = append(infos, info(pod, c, c.GetLinux().GetResources()))
	}
	us, err := pl.p.Synchronize(ctx, infos)
	if err != nil {
		pl.log.Error("synchronizing", "err", err)
		return nil, nil
	}
	pl.mu.Lock()
	select {
	case <-pl.up:
	default:
		close(pl.up)
	}
	pl.mu.Unlock()
	return toUpdates(us), nil
}

// CreateContainer places a new container and moves the others its
// arrival affects.
func (pl *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj, others, err := pl.p.Create(ctx, info(pod, c, c.GetLinux().GetResources()))
	if err != nil {
		pl.log.Error("placing a container: it runs as the runtime would run it", "container", c.GetId(), "err", err)
		return nil, nil, nil
	}
	var a *api.ContainerAdjustment
	if adj.ID != "" {
		a = &api.ContainerAdjustment{}
		if adj.CPUs != "" {
			a.SetLinuxCPUSetCPUs(adj.CPUs)
			a.SetLinuxCPUSetMems(adj.Mems)
		}
		if adj.Limit != 0 {
			a.SetLinuxMemoryLimit(adj.Limit)
		}
	}
	return a, toUpdates(others), nil
}

// UpdateContainer follows a container's new resources.
func (pl *Plugin) UpdateContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	us, err := pl.p.UpdateContainer(ctx, info(pod, c, res))
	if err != nil {
		pl.log.Error("updating a container", "container", c.GetId(), "err", err)
		return nil, nil
	}
	return toUpdates(us), nil
}

// StopContainer gives a stopped container's CPUs back.
func (pl *Plugin) StopContainer(ctx context.Context, _ *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	us, err := pl.p.StopContainer(ctx, c.GetId())
	if err != nil {
		pl.log.Error("stopping a container", "container", c.GetId(), "err", err)
		return nil, nil
	}
	return toUpdates(us), nil
}

// RemovePodSandbox forgets a pod.
func (pl *Plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	if err := pl.p.RemovePod(ctx, pod.GetId()); err != nil {
		pl.log.Error("removing a pod", "pod", pod.GetId(), "err", err)
	}
	return nil
}

// info turns the runtime's view of a container into the pipeline's.
func info(pod *api.PodSandbox, c *api.Container, res *api.LinuxResources) CtrInfo {
	p := Pod{ID: pod.GetId(), UID: pod.GetUid(), Namespace: pod.GetNamespace(), Name: pod.GetName(),
		Labels: pod.GetLabels(), Workload: workloadOf(pod)}
	ci := CtrInfo{Pod: p}
	ci.Ctr.ID, ci.Ctr.Pod, ci.Ctr.Name = c.GetId(), pod.GetId(), c.GetName()
	ci.Ctr.Namespace, ci.Ctr.PodName, ci.Ctr.Workload, ci.Ctr.Labels = p.Namespace, p.Name, p.Workload, p.Labels
	// The kubelet writes a CPU request as shares: 1024 a CPU, 2 for none.
	if sh := res.GetCpu().GetShares().GetValue(); sh > 2 {
		ci.Ctr.CPUMilli = int64((sh*1000 + 512) / 1024)
	}
	if cp := c.GetLinux().GetCgroupsPath(); len(cp) <= maxCgroupPath {
		ci.Ctr.Cgroup = cp
	}
	ci.Have = Owned{CPUs: res.GetCpu().GetCpus(), Mems: res.GetCpu().GetMems(), Limit: res.GetMemory().GetLimit().GetValue()}
	return ci
}

// workloadOf is a pod's Deployment: its annotation, or its name without
// the ReplicaSet's hash and the pod's suffix.
func workloadOf(pod *api.PodSandbox) string {
	if w := pod.GetAnnotations()[WorkloadAnnotation]; w != "" {
		return w
	}
	parts := strings.Split(pod.GetName(), "-")
	if len(parts) < 3 {
		return ""
	}
	return strings.Join(parts[:len(parts)-2], "-")
}

func toUpdates(us []Update) []*api.ContainerUpdate {
	if len(us) == 0 {
		return nil
	}
	out := make([]*api.ContainerUpdate, 0, len(us))
	for _, u := range us {
		cu := &api.ContainerUpdate{}
		cu.SetContainerId(u.ID)
		if u.CPUs != "" {
			cu.SetLinuxCPUSetCPUs(u.CPUs)
			cu.SetLinuxCPUSetMems(u.Mems)
		}
		if u.Limit != 0 {
			cu.SetLinuxMemoryLimit(u.Limit)
		}
		out = append(out, cu)
	}
	return out
}
