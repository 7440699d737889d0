package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// How many lines of a process's output a failure message carries.
const tailLines = 200

// errPortTaken marks a start that lost a free port to someone else between
// our probe and the child's bind; start then tries again with new ports.
var errPortTaken = errors.New("port taken")

// start starts etcd and kube-apiserver, waits for /readyz and installs the
// CRDs. On error nothing is left running.
func start(opts []Option) (*Env, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cleanStaleOnce.Do(cleanStale)
	apiBin, err := apiserverBinary()
	if err != nil {
		return nil, err
	}
	// etcd v3.6, built by make testenv: Debian's 3.4 lacks
	// RequestWatchProgress, without which client-go ≥ 0.35 watchers (the
	// controllers', kwok's) go stale.
	etcdBin, err := cachedBinary("etcd", EtcdVersion)
	if err != nil {
		return nil, err
	}
	for _, d := range o.crdDirs {
		if st, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("CRD directory: %w", err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("CRD directory %s is not a directory", d)
		}
	}
	for attempt := 1; ; attempt++ {
		e, err := tryStart(apiBin, etcdBin, o)
		if err == nil || !errors.Is(err, errPortTaken) || attempt == 3 {
			return e, err
		}
	}
}

func tryStart(apiBin, etcdBin string, o options) (_ *Env, err error) {
	t0 := time.Now()
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, err
	}
	e := &Env{Dir: dir, apiBin: apiBin}
	defer func() {
		if err != nil {
			_ = e.stop()
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]

	pki, err := writePKI(dir, o.servingIPs...)
	if err != nil {
		return nil, fmt.Errorf("generating certificates: %w", err)
	}
	e.caPEM, e.CAFile = pki.caPEM, pki.caFile
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	e.Token = hex.EncodeToString(tok)
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(e.Token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return nil, err
	}

	// etcd
	e.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	e.etcdLog = filepath.Join(dir, "etcd.log")
	e.etcd, err = startProcess("etcd", etcdBin, []string{
		"--name", "kubetest",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", e.EtcdURL,
		"--advertise-client-urls", e.EtcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "kubetest=" + peerURL,
		"--initial-cluster-state", "new",
		"--unsafe-no-fsync=true",
		// A test run writes little; keep the raft log held in memory small.
		"--snapshot-count", "10000",
		"--logger", "zap",
		"--log-outputs", "stderr",
	}, dir, e.etcdLog, nil)
	if err != nil {
		return nil, err
	}
	if err := waitReady(e.etcd, e.EtcdURL+"/health", nil, nil, func(code int, body []byte) bool {
		return code == http.StatusOK && bytes.Contains(body, []byte(`"health":"true"`))
	}); err != nil {
		return nil, err
	}

	// kube-apiserver
	e.Host = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	e.apiLog = filepath.Join(dir, "kube-apiserver.log")
	e.apiArgs = []string{
		"--etcd-servers", e.EtcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--tls-cert-file", pki.certFile,
		"--tls-private-key-file", pki.keyFile,
		"--token-auth-file", tokenFile,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", pki.saKeyFile,
		"--service-account-signing-key-file", pki.saKeyFile,
		"--service-cluster-ip-range", "10.0.0.0/24",
		// As kubeadm's clusters do: node agents (the eBPF DaemonSet) are
		// privileged pods.
		"--allow-privileged=true",
		// Lighter: no API priority and fairness machinery, no pprof, no
		// endpoint reconciler for the "kubernetes" Service.
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--endpoint-reconciler-type", "none",
	}
	if !o.serviceAccounts {
		e.apiArgs = append(e.apiArgs, "--disable-admission-plugins", "ServiceAccount")
	}
	if o.aggregation {
		fp, err := writeFrontProxy(dir)
		if err != nil {
			return nil, fmt.Errorf("generating the front proxy's certificates: %w", err)
		}
		e.apiArgs = append(e.apiArgs,
			"--client-ca-file", pki.caFile,
			"--requestheader-client-ca-file", fp.caFile,
			"--requestheader-allowed-names", frontProxyClient,
			"--requestheader-username-headers", "X-Remote-User",
			"--requestheader-group-headers", "X-Remote-Group",
			"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
			"--proxy-client-cert-file", fp.certFile,
			"--proxy-client-key-file", fp.keyFile,
		)
	}
	if e.apiserver, err = e.startAPIServer(); err != nil {
		return nil, err
	}

	if err := e.writeKubeconfig(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := e.installCRDs(ctx, o.crdDirs); err != nil {
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	e.StartupTime = time.Since(t0)
	return e, nil
}

// startAPIServer starts kube-apiserver with e.apiArgs and waits for /readyz.
func (e *Env) startAPIServer() (*process, error) {
	p, err := startProcess("kube-apiserver", e.apiBin, e.apiArgs, e.Dir, e.apiLog, nil)
	if err != nil {
		return nil, err
	}
	hdr := http.Header{"Authorization": {"Bearer " + e.Token}}
	if err := waitReady(p, e.Host+"/readyz", &tls.Config{RootCAs: rootCAs(e.caPEM)}, hdr, func(code int, _ []byte) bool { return code == http.StatusOK }); err != nil {
		p.stop(0)
		return nil, err
	}
	return p, nil
}

func (e *Env) writeKubeconfig() error {
	e.Kubeconfig = filepath.Join(e.Dir, "kubeconfig")
	q := strconv.Quote
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: kubetest
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: kubetest
current-context: kubetest
`, q(e.Host), q(e.CAFile), q(e.Token))
	return os.WriteFile(e.Kubeconfig, []byte(cfg), 0o600)
}

// process is a child in its own process group that dies with the test binary.
type process struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid after done
}

func startProcess(name, bin string, args []string, dir, logPath string, env []string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== kubetest: %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// Killed when the test binary dies, however it dies; a group of its own
	// so that a stop reaches anything it spawned and a ^C to `go test` does
	// not reach it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop signals the process group (SIGTERM, then SIGKILL after grace; SIGKILL
// at once when grace is 0) and waits for the process to exit.
func (p *process) stop(grace time.Duration) error {
	pgid := p.cmd.Process.Pid
	sig := syscall.SIGKILL
	if grace > 0 {
		sig = syscall.SIGTERM
	}
	_ = syscall.Kill(-pgid, sig)
	if grace > 0 {
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // anything left in its group
	return nil
}

// failure wraps a start failure with the process's last output.
func (p *process) failure(format string, args ...any) error {
	tail := tailFile(p.log, tailLines)
	err := fmt.Errorf("%s: %s; last lines of its output:\n%s", p.name, fmt.Sprintf(format, args...), tail)
	if strings.Contains(tail, "address already in use") {
		return errors.Join(err, errPortTaken)
	}
	return err
}

// waitReady polls url until ok says so, the process exits, or readyTimeout.
func waitReady(p *process, url string, tlsConf *tls.Config, hdr http.Header, ok func(code int, body []byte) bool) error {
	tr := &http.Transport{TLSClientConfig: tlsConf}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	last := "no answer yet"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if ok(resp.StatusCode, body) {
				return nil
			}
			last = fmt.Sprintf("%s: %s\n%s", url, resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return p.failure("not ready after %s (last probe: %s)", readyTimeout, last)
		}
		select {
		case <-p.done:
			return p.failure("exited before it was ready (%v)", p.err)
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct ports that were free on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const maxBytes = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxBytes {
		_, _ = f.Seek(st.Size()-maxBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var cleanStaleOnce sync.Once

// cleanStale removes what environments whose test binary died without
// stopping them left behind.
func cleanStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kubetest-*"))
	for _, d := range dirs {
		// Only a directory this user made as os.MkdirTemp makes them
		// (0700, not a link): another user's could name anything.
		st, err := os.Lstat(d)
		if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			// Its processes died with it (Pdeathsig), but a real node's
			// container shims are not its children: they, the node's
			// cgroups, mounts and bridge are removed here.
			killShims(filepath.Join(d, "node", "containerd.sock"))
			if b, err := os.ReadFile(filepath.Join(d, "cgroup-root")); err == nil {
				_ = removeCgroupRoot(strings.TrimSpace(string(b)))
			}
			_ = unmountUnder(d)
			if b, err := os.ReadFile(filepath.Join(d, "bridge")); err == nil {
				_ = removeBridge(strings.TrimSpace(string(b)))
			}
			_ = os.RemoveAll(d)
		}
	}
}

// rootCAs is a pool with the environment's CA.
func rootCAs(caPEM []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(caPEM)
	return p
}
