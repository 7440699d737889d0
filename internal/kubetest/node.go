package kubetest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real node: containerd (built by make testenv, with NRI) running
// Debian's runc, and a kubelet registered to the plane. Everything they
// keep — containerd's root and state, its sockets and NRI's, the kubelet's
// root and pod logs, CNI's configuration — sits under the plane's
// directory; the pods' cgroups under a cgroup root of the plane's own.
const (
	ContainerdVersion = "v2.4.2"
	// PauseImage is the sandbox image the node runs pods in, built here
	// (internal/kubetest/pause) since no image can be pulled.
	PauseImage = "setpoint.test/pause:1"
	// RealNodeName is the real node's name.
	RealNodeName = "kubetest-node"
	// RuncPath is Debian's runc, which make testenv installs.
	RuncPath = "/usr/sbin/runc"
	// CNIBinDir holds Debian's CNI plugins (containernetworking-plugins).
	CNIBinDir = "/usr/lib/cni"
)

// The names a node's bridge and cgroup root have: nothing else is ever
// removed, whatever a directory left behind says.
var (
	bridgeName     = regexp.MustCompile(`^kt[0-9a-f]{8}$`)
	cgroupRootName = regexp.MustCompile(`^/kubetest-[0-9a-f]{8}$`)
)

// realNode is the node's processes and where they keep things.
type realNode struct {
	dir        string
	bin        string // containerd's binaries
	sock       string // containerd's socket
	NRISocket  string
	cgroupRoot string // under every cgroup v1 hierarchy (and the unified one)
	bridge     string
	host       *hostLock
	ids        []string // the containers there were at the stop
	containerd *process
	kubelet    *process
}

// startRealNode starts containerd and the kubelet, imports the pause
// image, and waits for the node to be Ready and untainted.
func (p *Plane) startRealNode(ctx context.Context) (err error) {
	kubeletBin, err := cachedBinary("kubelet", kubeVersion())
	if err != nil {
		return err
	}
	root, err := testenvRoot()
	if err != nil {
		return err
	}
	n := &realNode{dir: filepath.Join(p.Dir, "node"), bin: filepath.Join(root, "containerd", ContainerdVersion), bridge: p.net.bridge}
	for _, b := range []string{filepath.Join(n.bin, "containerd"), filepath.Join(n.bin, "containerd-shim-runc-v2"), filepath.Join(n.bin, "ctr"), RuncPath, filepath.Join(CNIBinDir, "bridge")} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("the real node needs %s: run make testenv", b)
		}
	}
	// One real node on the machine at a time: the kubelet sets kernel
	// tunables for the whole machine (put back at the node's stop) and
	// keeps a device plugin socket at a fixed path.
	lockCtx, cancelLock := context.WithTimeout(context.Background(), 10*time.Minute)
	n.host, err = lockHost(lockCtx)
	cancelLock()
	if err != nil {
		return err
	}
	p.node = n
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	n.cgroupRoot = "/kubetest-" + hex.EncodeToString(suffix)
	if err := os.WriteFile(filepath.Join(p.Dir, "cgroup-root"), []byte(n.cgroupRoot), 0o644); err != nil {
		return err
	}
	for _, d := range []string{"containerd/root", "containerd/state", "nri/plugins", "nri/conf.d", "cni/conf", "kubelet", "pod-logs", "opt", "images"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	n.sock = filepath.Join(n.dir, "containerd.sock")
	n.NRISocket = filepath.Join(n.dir, "nri.sock")
	q := strconv.Quote
	config := fmt.Sprintf(`version = 3
root = %s
state = %s
imports = []

[grpc]
  address = %s

[ttrpc]
  address = %s

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %s
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    socket_path = %s
    plugin_path = %s
    plugin_config_path = %s
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %s
  [plugins.'io.containerd.cri.v1.runtime']
    cdi_spec_dirs = []
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %s
          Root = %s
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%s]
      conf_dir = %s
`, q(filepath.Join(n.dir, "containerd/root")), q(filepath.Join(n.dir, "containerd/state")),
		q(n.sock), q(n.sock+".ttrpc"), q(filepath.Join(n.dir, "opt")),
		q(n.NRISocket), q(filepath.Join(n.dir, "nri/plugins")), q(filepath.Join(n.dir, "nri/conf.d")),
		q(PauseImage), q(RuncPath), q(filepath.Join(n.dir, "runc")), q(CNIBinDir), q(filepath.Join(n.dir, "cni/conf")))
	cfgPath := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return err
	}
	// The pods' network: the plane's bridge, no gateway, no route beyond
	// it (the host does not forward), so a pod reaches the node's address
	// (the API server's proxy, the kubelet) and the other pods, nothing else.
	cni := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %s, "plugins": [
  {"type": "bridge", "bridge": %s, "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %s, "rangeStart": %s}]], "dataDir": %s}},
  {"type": "loopback"}]}
`, q(cniNetwork(p.net.bridge)), q(p.net.bridge), q(p.net.subnet.String()), q(p.net.firstPod().String()), q(filepath.Join(n.dir, "cni/ipam")))
	if err := os.WriteFile(filepath.Join(n.dir, "cni/conf/10-kubetest.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	env := []string{"PATH=" + n.bin + ":" + os.Getenv("PATH")}
	n.containerd, err = startProcess("containerd", filepath.Join(n.bin, "containerd"), []string{"--config", cfgPath},
		n.dir, filepath.Join(p.Dir, "containerd.log"), env)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, n.containerd)
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	if err := n.importPause(ctx); err != nil {
		return err
	}

	// The kubelet: cgroup v1 allowed, cgroupfs, the pods' cgroups under
	// the plane's cgroup root, its API served on loopback with the plane's
	// CA for clients and webhook authorisation, no eviction or image GC
	// on a shared disk.
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	kcfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: %s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
podLogsDir: %s
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
localStorageCapacityIsolation: false
nodeStatusReportFrequency: 10s
syncFrequency: 10s
`, q(n.cgroupRoot), q("unix://"+n.sock), q(p.net.ip.String()), ports[0], ports[1],
		q(filepath.Join(p.Dir, "pki", "apiserver.crt")), q(filepath.Join(p.Dir, "pki", "apiserver.key")),
		q(p.CAFile), q(filepath.Join(n.dir, "pod-logs")))
	kcfgPath := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(kcfgPath, []byte(kcfg), 0o644); err != nil {
		return err
	}
	if err := n.makeCgroupRoot(); err != nil {
		return err
	}
	n.kubelet, err = startProcess("kubelet", kubeletBin, []string{
		"--config", kcfgPath,
		"--kubeconfig", p.Kubeconfig,
		"--hostname-override", RealNodeName,
		"--node-ip", p.net.ip.String(),
		"--root-dir", filepath.Join(n.dir, "kubelet"),
		"--cert-dir", filepath.Join(n.dir, "kubelet", "pki"),
		"--v", "2",
	}, n.dir, filepath.Join(p.Dir, "kubelet.log"), nil)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, n.kubelet)
	if err := p.waitNode(ctx, RealNodeName); err != nil {
		return errors.Join(err, n.kubelet.failure("the node did not become Ready"))
	}
	return nil
}

// waitContainerd polls `ctr version` until containerd answers.
func (n *realNode) waitContainerd(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	last := ""
	for {
		_, err := n.ctr(ctx, "version")
		if err == nil {
			return nil
		}
		last = err.Error()
		select {
		case <-ctx.Done():
			return n.containerd.failure("not serving %s (%s)", n.sock, last)
		case <-n.containerd.done:
			return n.containerd.failure("exited before it served (%v)", n.containerd.err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ctr runs containerd's CLI against the node's containerd, in the
// namespace the CRI uses.
func (n *realNode) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.bin, "ctr"), append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Its answer on stdout only: it warns on stderr (cgroup v1).
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return string(out), nil
}

// importPause builds the pause program and imports it as PauseImage.
func (n *realNode) importPause(ctx context.Context) error {
	return n.importProgram(ctx, "github.com/setpoint-dev/setpoint/internal/kubetest/pause", PauseImage)
}

// importProgram builds a Go command (static) and imports it as a one-file
// image ref whose entrypoint it is (/NAME, NAME the package's last element).
func (n *realNode) importProgram(ctx context.Context, pkg, ref string) error {
	base := pkg[strings.LastIndex(pkg, "/")+1:]
	// Named by the image, so two commands of one name stay apart.
	bin := filepath.Join(n.dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(ref))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w: %s", pkg, err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	tarPath := bin + ".tar"
	if err := WriteImage(tarPath, ref, []ImageFile{{Path: "/" + base, Mode: 0o755, Data: b}}, []string{"/" + base}); err != nil {
		return err
	}
	return n.importImage(ctx, tarPath)
}

// ImportProgram builds the Go command pkg and imports it into the real
// node as the image ref, its one file /NAME its entrypoint: a test's own
// workload, since no image can be pulled.
func (p *Plane) ImportProgram(ctx context.Context, pkg, ref string) error {
	if p.node == nil {
		return fmt.Errorf("the plane has no real node")
	}
	return p.node.importProgram(ctx, pkg, ref)
}

func (n *realNode) importImage(ctx context.Context, tarPath string) error {
	_, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", "--platform", "linux/"+goarch(), tarPath)
	return err
}

// ImportImage imports an image archive (docker save or OCI layout tar)
// into the real node's containerd, where the kubelet finds it without a
// pull (imagePullPolicy IfNotPresent or Never).
func (p *Plane) ImportImage(ctx context.Context, tarPath string) error {
	if p.node == nil {
		return errors.New("kubetest: ImportImage needs a plane with a real node")
	}
	return p.node.importImage(ctx, tarPath)
}

// NRISocket is the real node's containerd NRI socket ("" without one).
func (p *Plane) NRISocket() string {
	if p.node == nil {
		return ""
	}
	return p.node.NRISocket
}

// PodLogsDir is where the real node's kubelet writes its pods' logs ("" without
// one): DIR/NAMESPACE_POD_UID/CONTAINER/N.log.
func (p *Plane) PodLogsDir() string {
	if p.node == nil {
		return ""
	}
	return filepath.Join(p.node.dir, "pod-logs")
}

// KubeletRootDir is the real node's kubelet root directory ("" without
// one): its pods' volumes are under pods/UID/volumes.
func (p *Plane) KubeletRootDir() string {
	if p.node == nil {
		return ""
	}
	return filepath.Join(p.node.dir, "kubelet")
}

// CgroupRoot is the cgroup the real node's pods live under ("" without
// one).
func (p *Plane) CgroupRoot() string {
	if p.node == nil {
		return ""
	}
	return p.node.cgroupRoot
}

// UnifiedCgroupRoot is the real node's cgroup root in the cgroup2
// (unified) hierarchy ("" without a node or without such a mount): runc
// puts each container there too, at the same path as under the v1
// controllers, so a cgroup program attached here sees the node's pods and
// nothing else on the machine.
func (p *Plane) UnifiedCgroupRoot() string {
	if p.node == nil {
		return ""
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return ""
	}
	for _, h := range hs {
		var st syscall.Statfs_t
		if syscall.Statfs(h, &st) == nil && st.Type == cgroup2Magic {
			return filepath.Join(h, p.node.cgroupRoot)
		}
	}
	return ""
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC.
const cgroup2Magic = 0x63677270

// BPFFS mounts a bpffs of the real node's own (once) and returns where:
// the node's /sys/fs/bpf, for an agent's hostPath volume. It is a shared
// mount, as a Bidirectional mount propagation needs, and the node's stop
// unmounts it (pins there go with it).
func (p *Plane) BPFFS() (string, error) {
	if p.node == nil {
		return "", fmt.Errorf("the plane has no real node")
	}
	dir := filepath.Join(p.node.dir, "bpffs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "", err
	}
	if st.Type != bpffsMagic {
		if err := syscall.Mount("bpffs", dir, "bpf", 0, "mode=0700"); err != nil {
			return "", fmt.Errorf("mounting a bpffs at %s: %w", dir, err)
		}
		if err := syscall.Mount("", dir, "", syscall.MS_SHARED, ""); err != nil {
			return "", fmt.Errorf("making %s a shared mount: %w", dir, err)
		}
	}
	return dir, nil
}

// bpffsMagic is BPF_FS_MAGIC.
const bpffsMagic = 0xcafe4a11

// ImageFile is a file of an image WriteImage makes.
type ImageFile struct {
	Path string
	Mode int64
	Data []byte
}

// WriteImage writes a one-layer image of files, tagged ref, running
// entrypoint, as a docker-save archive at path (what ctr imports).
func WriteImage(path, ref string, files []ImageFile, entrypoint []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(filepath.Clean(f.Path), "/")
		for d := filepath.Dir(rel); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.Mode, Size: int64(len(f.Data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", goarch()
	cf.Config.Entrypoint = entrypoint
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers
// and the unified one), as directories.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[sep+1]; fs == "cgroup" || fs == "cgroup2" {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// makeCgroupRoot creates the node's cgroup root in every hierarchy (the
// kubelet checks it exists), with cpuset's CPUs and memory nodes copied
// from the parent, which a new cpuset cgroup starts without.
func (n *realNode) makeCgroupRoot() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, n.cgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating the cgroup %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("writing %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroups, deepest first, killing
// anything still in them.
func removeCgroupRoot(root string) error {
	if !cgroupRootName.MatchString(root) {
		return nil
	}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		top := filepath.Join(h, root)
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			killCgroup(dirs[i])
			if err := removeCgroupDir(dirs[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// killCgroup SIGKILLs every process in the cgroup directory.
func killCgroup(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// removeCgroupDir removes an emptied cgroup, retrying while its killed
// processes exit.
func removeCgroupDir(dir string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing the cgroup %s: %w", dir, err)
		}
		killCgroup(dir)
		time.Sleep(50 * time.Millisecond)
	}
}

// unmountUnder lazily unmounts every mount under dir, deepest first (the
// kubelet's volume mounts, containerd's rootfs and shm mounts).
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// stopNode stops the kubelet, then every container containerd runs (their
// shims outlive containerd by design), then containerd, and removes what
// they leave in the kernel: mounts under the node's directory, its bridge
// and its cgroups.
func (n *realNode) stop() error {
	var errs []error
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.stop(10*time.Second))
	}
	if n.containerd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		n.removeContainers(ctx)
		cancel()
		errs = append(errs, n.containerd.stop(10*time.Second))
	}
	killShims(n.sock)
	errs = append(errs, removeCgroupRoot(n.cgroupRoot))
	errs = append(errs, unmountUnder(n.dir))
	removeHostFiles(n.dir, n.bridge, n.ids)
	errs = append(errs, n.host.release())
	return errors.Join(errs...)
}

// cniNetwork is the pods' network's name: libcni's cache files under
// /var/lib/cni/results start with it.
func cniNetwork(bridge string) string { return "kubetest-" + bridge }

// removeHostFiles removes what the node leaves outside its directory when
// its pods were not torn down one by one: libcni's cached results of its
// network and of the containers' loopback, and the kubelet's symlinks in
// /var/log/containers to its pods' logs.
func removeHostFiles(dir, bridge string, ids []string) {
	if bridgeName.MatchString(bridge) {
		files, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", cniNetwork(bridge)+"-*"))
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	for _, id := range ids {
		if hexID.MatchString(id) {
			_ = os.Remove(filepath.Join("/var/lib/cni/results", "cni-loopback-"+id+"-lo"))
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil && strings.HasPrefix(t, dir+"/") {
			_ = os.Remove(l)
		}
	}
}

var hexID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// removeContainers kills and deletes every task and container (the pods'
// sandboxes included) in the CRI's namespace.
func (n *realNode) removeContainers(ctx context.Context) {
	if out, err := n.ctr(ctx, "containers", "ls", "-q"); err == nil {
		n.ids = strings.Fields(out)
	}
	out, err := n.ctr(ctx, "tasks", "ls", "-q")
	if err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", id)
			_, _ = n.ctr(ctx, "tasks", "delete", "-f", id)
		}
	}
	if out, err := n.ctr(ctx, "containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			_, _ = n.ctr(ctx, "containers", "delete", id)
		}
	}
}

// killShims SIGKILLs the runc shims started for the containerd at sock
// (their command line names its address), which a killed containerd
// leaves running.
func killShims(sock string) {
	if sock == "" {
		return
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err != nil || !bytes.Contains(b, []byte("containerd-shim")) || !bytes.Contains(b, []byte(sock)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(c))); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitNode waits for the node to register, be Ready and lose its taints.
func (p *Plane) waitNode(ctx context.Context, nodeName string) error {
	_, cs, _, err := p.clients()
	if err != nil {
		return err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && nodeReady(n) && len(n.Spec.Taints) == 0 {
			return nil
		}
		var exited <-chan struct{}
		if p.node != nil && p.node.kubelet != nil {
			exited = p.node.kubelet.done
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready and untainted: %w", nodeName, ctx.Err())
		case <-exited:
			return fmt.Errorf("node %s: the kubelet exited (%v)", nodeName, p.node.kubelet.err)
		case <-tick.C:
		}
	}
}

func goarch() string { return runtime.GOARCH }

// nodeNet is the real node's network: a bridge of the plane's own with the
// node's address, in a /24 of 10/8 chosen at random. The host does not
// forward (net.ipv4.ip_forward is 0 on these machines, and nothing here
// turns it on) and the pods get no default route, so nothing on it talks
// beyond this machine.
type nodeNet struct {
	bridge string
	ip     net.IP // the node's: the bridge's address
	subnet *net.IPNet
}

// pickNodeNet chooses the network (a /24 no route of the host's overlaps):
// the API server's certificate names its address before it exists.
func pickNodeNet() (*nodeNet, error) {
	for range 16 {
		r := make([]byte, 4)
		if _, err := rand.Read(r); err != nil {
			return nil, err
		}
		n := &nodeNet{bridge: "kt" + hex.EncodeToString(r),
			ip:     net.IPv4(10, 128+r[0]%64, r[1], 1).To4(),
			subnet: &net.IPNet{IP: net.IPv4(10, 128+r[0]%64, r[1], 0).To4(), Mask: net.CIDRMask(24, 32)}}
		if !n.overlapsHost() {
			return n, nil
		}
	}
	return nil, errors.New("no /24 of 10.128.0.0/10 free of the host's addresses")
}

// overlapsHost says an address of the host's is in the subnet, or the
// subnet in one of the host's networks.
func (n *nodeNet) overlapsHost() bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true
	}
	for _, a := range addrs {
		if in, ok := a.(*net.IPNet); ok && (n.subnet.Contains(in.IP) || in.Contains(n.subnet.IP)) {
			return true
		}
	}
	return false
}

// create makes the bridge and records its name in dir, so that a later
// run removes it if this one is killed.
func (n *nodeNet) create(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "bridge"), []byte(n.bridge), 0o644); err != nil {
		return err
	}
	cmds := [][]string{
		{"link", "add", "name", n.bridge, "type", "bridge"},
		{"addr", "add", n.ip.String() + "/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			_ = n.remove()
			return fmt.Errorf("creating the node's bridge: ip %s: %w: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// firstPod is the first address pods get (.10: below it the node's).
func (n *nodeNet) firstPod() net.IP {
	ip := slices.Clone(n.subnet.IP.To4())
	ip[3] = 10
	return ip
}

// remove deletes the bridge (and the pods' veths on it go with their
// namespaces). Nil-safe.
func (n *nodeNet) remove() error {
	if n == nil {
		return nil
	}
	return removeBridge(n.bridge)
}

func removeBridge(name string) error {
	if !bridgeName.MatchString(name) {
		return nil
	}
	if _, err := net.InterfaceByName(name); err != nil {
		return nil // gone already
	}
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("removing the bridge %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// proxyAPI serves the API server at the node's address and the API
// server's port, forwarding to it on loopback: where the node's pods reach
// it (InClusterHost), with no kube-proxy to route the kubernetes Service.
func (p *Plane) proxyAPI() error {
	u, err := url.Parse(p.Host)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(p.net.ip.String(), u.Port()))
	if err != nil {
		return fmt.Errorf("serving the API server on the node's network: %w", err)
	}
	p.proxy = l
	target := u.Host
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return nil
}

// InClusterHost is the API server's host and port as the real node's pods
// reach it (the KUBERNETES_SERVICE_HOST and _PORT an install without
// kube-proxy sets), "" and "" without a real node.
func (p *Plane) InClusterHost() (host, port string) {
	if p.net == nil {
		return "", ""
	}
	u, err := url.Parse(p.Host)
	if err != nil {
		return "", ""
	}
	return p.net.ip.String(), u.Port()
}

// NodeIP is the real node's address ("" without one).
func (p *Plane) NodeIP() string {
	if p.net == nil {
		return ""
	}
	return p.net.ip.String()
}

// hostLock is the machine's one real node: an exclusive flock, and the
// kernel tunables the kubelet sets, as they were before it, to put back.
type hostLock struct {
	f *os.File
}

// The lock and the saved tunables live beside every plane's directory.
var (
	hostLockPath = filepath.Join(os.TempDir(), "kubetest-realnode.lock")
	sysctlsPath  = filepath.Join(os.TempDir(), "kubetest-realnode-sysctls")
	// kubeletSysctls are what the kubelet's container manager sets
	// (protectKernelDefaults off: it cannot be told not to).
	kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}
)

// lockHost takes the machine's real-node lock (waiting while another
// test's node runs; a killed holder's lock goes with it), puts back the
// tunables a killed holder left changed, and saves them as they are.
func lockHost(ctx context.Context) (*hostLock, error) {
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", hostLockPath, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another test's real node held %s: %w", hostLockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	h := &hostLock{f: f}
	if err := restoreSysctls(); err != nil {
		_ = h.unlock()
		return nil, err
	}
	var b strings.Builder
	for _, k := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", k, strings.TrimSpace(string(v)))
	}
	if err := os.WriteFile(sysctlsPath, []byte(b.String()), 0o600); err != nil {
		_ = h.unlock()
		return nil, err
	}
	return h, nil
}

// restoreSysctls puts back the tunables a holder saved, if it saved any
// and did not put them back, and forgets them.
func restoreSysctls() error {
	b, err := os.ReadFile(sysctlsPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || !slices.Contains(kubeletSysctls, k) {
			continue
		}
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("putting back %s: %w", k, err))
		}
	}
	if err := os.Remove(sysctlsPath); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// release puts the tunables back and unlocks. Nil-safe.
func (h *hostLock) release() error {
	if h == nil || h.f == nil {
		return nil
	}
	return errors.Join(restoreSysctls(), h.unlock())
}

func (h *hostLock) unlock() error {
	err := syscall.Flock(int(h.f.Fd()), syscall.LOCK_UN)
	h.f.Close()
	h.f = nil
	return err
}

// drainNode deletes every pod bound to the real node at once (grace 0)
// and waits, 30 s at most, until the kubelet has stopped their containers
// and sandboxes (CNI's teardown of their network included).
func (p *Plane) drainNode() {
	if p.node == nil || p.node.kubelet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, cs, _, err := p.clients()
	if err != nil {
		return
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName})
	if err != nil {
		return
	}
	zero := int64(0)
	for _, pod := range pods.Items {
		_ = cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	for {
		// Stopped, a pod's containers stay (the kubelet collects them
		// later); its tasks go, the sandbox's with its network.
		out, err := p.node.ctr(ctx, "tasks", "ls", "-q")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-p.node.kubelet.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
