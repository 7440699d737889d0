// Package nritest runs the runtime side of NRI in process: the real
// containerd/nri adaptation listening on a real ttrpc socket, with a
// small container table standing in for the runtime's own state, so a
// plugin under test connects, synchronizes and adjusts as it would
// against containerd.
package nritest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Runtime is the runtime side.
type Runtime struct {
	*adaptation.Adaptation
	Socket string

	mu   sync.Mutex
	pods map[string]*api.PodSandbox
	ctrs map[string]*api.Container
	// Unsolicited are the updates plugins sent through UpdateContainers,
	// in order.
	unsolicited []*api.ContainerUpdate
	changed     chan struct{}
}

// Start runs the adaptation on a socket in a fresh directory.
func Start(tb testing.TB) *Runtime {
	tb.Helper()
	// sun_path holds ~108 bytes: a short directory, not tb.TempDir().
	dir, err := os.MkdirTemp("", "nri")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	r := &Runtime{Socket: filepath.Join(dir, "nri.sock"), pods: map[string]*api.PodSandbox{}, ctrs: map[string]*api.Container{},
		changed: make(chan struct{})}
	a, err := adaptation.New("containerd", "v2-test", r.sync, r.update,
		adaptation.WithSocketPath(r.Socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")))
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Stop)
	r.Adaptation = a
	return r
}

func (r *Runtime) sync(ctx context.Context, cb adaptation.SyncCB) error {
	r.mu.Lock()
	pods := make([]*api.PodSandbox, 0, len(r.pods))
	for _, p := range r.pods {
		pods = append(pods, proto.Clone(p).(*api.PodSandbox))
	}
	ctrs := make([]*api.Container, 0, len(r.ctrs))
	for _, c := range r.ctrs {
		ctrs = append(ctrs, proto.Clone(c).(*api.Container))
	}
	r.mu.Unlock()
	ups, err := cb(ctx, pods, ctrs)
	if err != nil {
		return err
	}
	r.mu.Lock()
	for _, u := range ups {
		r.applyUpdate(u)
	}
	r.mu.Unlock()
	return nil
}

func (r *Runtime) update(_ context.Context, ups []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var failed []*api.ContainerUpdate
	for _, u := range ups {
		if !r.applyUpdate(u) {
			failed = append(failed, u)
			continue
		}
		r.unsolicited = append(r.unsolicited, proto.Clone(u).(*api.ContainerUpdate))
	}
	r.signal()
	return failed, nil
}

// signal wakes whoever waits for a change; called with mu held.
func (r *Runtime) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Changed is closed at the next unsolicited update.
func (r *Runtime) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func resources(c *api.Container) *api.LinuxResources {
	if c.Linux == nil {
		c.Linux = &api.LinuxContainer{}
	}
	if c.Linux.Resources == nil {
		c.Linux.Resources = &api.LinuxResources{}
	}
	res := c.Linux.Resources
	if res.Cpu == nil {
		res.Cpu = &api.LinuxCPU{}
	}
	if res.Memory == nil {
		res.Memory = &api.LinuxMemory{}
	}
	return res
}

func merge(res, from *api.LinuxResources) {
	if from == nil {
		return
	}
	if c := from.GetCpu(); c != nil {
		if c.Cpus != "" {
			res.Cpu.Cpus = c.Cpus
		}
		if c.Mems != "" {
			res.Cpu.Mems = c.Mems
		}
		if c.Shares != nil {
			res.Cpu.Shares = c.Shares
		}
	}
	if m := from.GetMemory(); m != nil && m.Limit != nil {
		res.Memory.Limit = m.Limit
	}
}

// applyUpdate applies an update to a known container; called with mu
// held.
func (r *Runtime) applyUpdate(u *api.ContainerUpdate) bool {
	c, ok := r.ctrs[u.ContainerId]
	if !ok {
		return false
	}
	merge(resources(c), u.GetLinux().GetResources())
	return true
}

// Pod makes a pod sandbox.
func Pod(id, namespace, name string, labels map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Uid: "uid-" + id, Namespace: namespace, Name: name, Labels: labels}
}

// Container makes a container of pod with a CPU request (as the kubelet
// writes it: shares) and a memory limit (0: none).
func Container(pod *api.PodSandbox, id, name string, cpuMilli, limit int64) *api.Container {
	c := &api.Container{Id: id, PodSandboxId: pod.Id, Name: name, State: api.ContainerState_CONTAINER_CREATED}
	res := resources(c)
	res.Cpu.Shares = api.UInt64(uint64(max(2, cpuMilli*1024/1000)))
	if limit > 0 {
		res.Memory.Limit = api.Int64(limit)
	}
	return c
}

// Add puts pods and containers in the runtime's table without telling
// plugins: what a node ran before the plugin connected.
func (r *Runtime) Add(pod *api.PodSandbox, ctrs ...*api.Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[pod.Id] = proto.Clone(pod).(*api.PodSandbox)
	for _, c := range ctrs {
		c.State = api.ContainerState_CONTAINER_RUNNING
		r.ctrs[c.Id] = proto.Clone(c).(*api.Container)
	}
}

// Create creates a container as containerd does: plugins adjust it, the
// adjustment and the updates of other containers in the reply are
// applied, and the container runs.
func (r *Runtime) Create(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.CreateContainerResponse, error) {
	r.mu.Lock()
	r.pods[pod.Id] = proto.Clone(pod).(*api.PodSandbox)
	r.mu.Unlock()
	rpl, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: c})
	if err != nil {
		return nil, err
	}
	c = proto.Clone(c).(*api.Container)
	merge(resources(c), rpl.GetAdjust().GetLinux().GetResources())
	c.State = api.ContainerState_CONTAINER_RUNNING
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctrs[c.Id] = c
	for _, u := range rpl.Update {
		r.applyUpdate(u)
	}
	return rpl, nil
}

// Stop stops a container, applying the updates plugins return, and
// forgets it.
func (r *Runtime) Stop(ctx context.Context, id string) (*api.StopContainerResponse, error) {
	r.mu.Lock()
	c, ok := r.ctrs[id]
	if !ok {
		r.mu.Unlock()
		return nil, fmt.Errorf("no container %s", id)
	}
	pod := r.pods[c.PodSandboxId]
	r.mu.Unlock()
	rpl, err := r.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: c})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ctrs, id)
	for _, u := range rpl.Update {
		r.applyUpdate(u)
	}
	return rpl, nil
}

// RemovePod removes a pod and its containers.
func (r *Runtime) RemovePod(ctx context.Context, id string) error {
	r.mu.Lock()
	pod := r.pods[id]
	delete(r.pods, id)
	for cid, c := range r.ctrs {
		if c.PodSandboxId == id {
			delete(r.ctrs, cid)
		}
	}
	r.mu.Unlock()
	if pod == nil {
		return fmt.Errorf("no pod %s", id)
	}
	return r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
}

// Resources is a container's CPU set, memory nodes and memory limit as
// the runtime has them.
type Resources struct {
	CPUs, Mems string
	Limit      int64
}

// Resources reports every container's resources.
func (r *Runtime) Resources() map[string]Resources {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]Resources{}
	for id, c := range r.ctrs {
		res := resources(c)
		out[id] = Resources{CPUs: res.Cpu.Cpus, Mems: res.Cpu.Mems, Limit: res.Memory.GetLimit().GetValue()}
	}
	return out
}

// Unsolicited returns the updates plugins sent on their own, in order.
func (r *Runtime) Unsolicited() []*api.ContainerUpdate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*api.ContainerUpdate(nil), r.unsolicited...)
}

// WaitRegistered returns once no plugin is synchronizing, so a plugin
// whose Synchronize ran is registered and sees the next event.
func (r *Runtime) WaitRegistered() { r.BlockPluginSync().Unblock() }
