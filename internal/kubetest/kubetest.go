// Package kubetest runs a real etcd and kube-apiserver on loopback for tests
// that talk to Kubernetes.
//
// Only the API server runs: no controller manager, scheduler or kubelet. So
// Deployments get no pods, namespaces stay Terminating after a delete and
// statuses move only when a test writes them; API-level behaviour (server-side
// apply and its conflicts, managed fields, CRDs, RBAC, leases) is real.
//
// A package that uses the shared environment calls Main from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
//
//	func TestX(t *testing.T) {
//		env := kubetest.Shared(t)
//		ns := env.Namespace(t)
//		cs := env.Clientset(t)
//		...
//	}
//
// The shared environment starts on the first Shared call (a package run that
// selects no such test pays nothing) and stops when the run ends. Tests that
// must stop and restart the API server take a private one with Start.
//
// The binaries come from `make testenv`, built from source and cached by
// version: kube-apiserver (hack/testenv/kube-component.sh) and etcd v3.6
// (hack/testenv/etcd.sh); StartPlane adds kube-controller-manager,
// kube-scheduler and kwok. When one is missing the tests fail, naming `make testenv`;
// they never skip.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// DefaultKubeVersion is the kube-apiserver version used when
// SETPOINT_KUBE_VERSION is not set; the Makefile's KUBE_VERSION must match.
const DefaultKubeVersion = "v1.35.4"

// How long a start (etcd, kube-apiserver /readyz, CRDs Established) may take.
const readyTimeout = 60 * time.Second

// Env is one running etcd + kube-apiserver. Its methods are safe for
// concurrent use by parallel tests.
type Env struct {
	Host       string // https://127.0.0.1:PORT
	Token      string // bearer token of "admin" in system:masters
	CAFile     string // PEM of the CA that signed the API server's serving certificate
	Kubeconfig string // kubeconfig with cluster, user and context "kubetest" (admin)
	Dir        string // private temporary directory, removed at stop
	EtcdURL    string // http://127.0.0.1:PORT of its etcd

	// StartupTime is how long the start took, to /readyz and the CRDs
	// Established; RestartTime the last StartAPIServer's.
	StartupTime, RestartTime time.Duration

	shared  bool
	caPEM   []byte
	apiBin  string
	apiArgs []string
	apiLog  string
	etcdLog string

	mu        sync.Mutex
	etcd      *process
	apiserver *process
	stopped   bool

	mapperOnce sync.Once
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	dyn        dynamic.Interface
	cs         kubernetes.Interface
	clientErr  error
}

// Option configures an environment.
type Option func(*options)

type options struct {
	crdDirs []string
	// aggregation configures the API server's aggregation layer (the
	// full plane's metrics-server is served through it).
	aggregation bool
	// servingIPs are more addresses the API server's certificate names
	// (the real node's, where its pods reach it).
	servingIPs []net.IP
	// serviceAccounts admits pods with their service account's token
	// mounted, as a cluster does (the real node runs them).
	serviceAccounts bool
}

// WithCRDs installs every *.yaml file of each directory (relative to the
// test's working directory, i.e. the package directory) after the embedded
// CRDs, and waits until every CRD among them is Established. The files may
// hold other objects too; they are created like Apply does. A directory that
// does not exist is an error.
func WithCRDs(dirs ...string) Option {
	return func(o *options) { o.crdDirs = append(o.crdDirs, dirs...) }
}

var shared struct {
	mu      sync.Mutex
	main    bool
	opts    []Option
	started bool
	env     *Env
	err     error
}

// Main runs the package's tests with one shared environment and exits. Call
// it from TestMain. The environment starts on the first Shared call and stops
// after m.Run.
func Main(m *testing.M, opts ...Option) {
	os.Exit(Run(m, opts...))
}

// Run is Main without the exit, for a TestMain with its own set-up and
// tear-down: it returns m.Run's code.
func Run(m *testing.M, opts ...Option) int {
	shared.mu.Lock()
	shared.main = true
	shared.opts = opts
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	env := shared.env
	shared.mu.Unlock()
	if env != nil {
		if err := env.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stopping the shared environment: %v\n", err)
		}
	}
	return code
}

// MainWithCRDs is Main(m, WithCRDs(dirs...)).
func MainWithCRDs(m *testing.M, dirs ...string) {
	Main(m, WithCRDs(dirs...))
}

// Shared returns the package's environment, starting it on the first call. It
// fails the test when TestMain did not call Main or the start failed (every
// later call fails with the same error).
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		t.Fatal("kubetest.Shared: no shared environment: call kubetest.Main(m) from the package's TestMain")
	}
	if !shared.started {
		shared.started = true
		shared.env, shared.err = start(shared.opts)
		if shared.env != nil {
			shared.env.shared = true
		}
	}
	if shared.err != nil {
		t.Fatalf("kubetest: the shared environment did not start: %v", shared.err)
	}
	return shared.env
}

// Start starts a private environment, for tests that stop or restart the API
// server; it stops at the test's cleanup.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e, err := start(opts)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("kubetest: stopping: %v", err)
		}
	})
	return e
}

// Config returns a client configuration for the admin (system:masters). The
// client-side rate limit is high enough not to slow tests down.
func (e *Env) Config() *rest.Config {
	return &rest.Config{
		Host:            e.Host,
		BearerToken:     e.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), e.caPEM...)},
		QPS:             1000,
		Burst:           2000,
	}
}

// ConfigAs returns a configuration that impersonates user (and groups)
// through the admin: requests are authorized as that user, which RBAC knows
// nothing about unless the test binds it a role.
func (e *Env) ConfigAs(user string, groups ...string) *rest.Config {
	c := e.Config()
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return c
}

// Clientset returns a typed admin client.
func (e *Env) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatalf("kubetest: clientset: %v", err)
	}
	return cs
}

// Dynamic returns a dynamic admin client.
func (e *Env) Dynamic(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		t.Fatalf("kubetest: dynamic client: %v", err)
	}
	return d
}

// clients returns the environment's own admin clients and RESTMapper.
func (e *Env) clients() (dynamic.Interface, kubernetes.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	e.mapperOnce.Do(func() {
		c := e.Config()
		dc, err := discovery.NewDiscoveryClientForConfig(c)
		if err != nil {
			e.clientErr = err
			return
		}
		if e.dyn, err = dynamic.NewForConfig(c); err != nil {
			e.clientErr = err
			return
		}
		if e.cs, err = kubernetes.NewForConfig(c); err != nil {
			e.clientErr = err
			return
		}
		e.mapper = restmapper.NewDeferredDiscoveryRESTMapperWithContext(memory.NewMemCacheClientWithContext(dc))
	})
	return e.dyn, e.cs, e.mapper, e.clientErr
}

// Namespace creates a namespace named after the test (sanitised to DNS-1123,
// with a random suffix) and deletes it at cleanup. Without a namespace
// controller the deleted namespace stays Terminating with its objects; the
// names never repeat, so this only matters to tests that list across
// namespaces.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	_, cs, _, err := e.clients()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(t.Name()),
		Annotations:  map[string]string{"kubetest.setpoint.dev/test": t.Name()},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: creating a namespace for %s: %v", t.Name(), err)
	}
	name := ns.Name
	t.Cleanup(func() {
		e.mu.Lock()
		stopped := e.stopped || e.apiserver == nil
		e.mu.Unlock()
		if stopped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("kubetest: deleting namespace %s: %v", name, err)
		}
	})
	return name
}

var nonDNS = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix turns a test name into a GenerateName prefix: DNS-1123
// label characters, at most 58 of them with the trailing "-", so that the
// server's 5 random characters keep the name within 63.
func namespacePrefix(testName string) string {
	s := nonDNS.ReplaceAllString(strings.ToLower(testName), "-")
	s = strings.Trim(s, "-")
	if len(s) > 57 {
		s = strings.TrimRight(s[:57], "-")
	}
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 10 s) and
// waits for it to exit; etcd keeps running. Not allowed on the shared
// environment.
func (e *Env) StopAPIServer() error {
	if e.shared {
		return errors.New("kubetest: StopAPIServer on the shared environment would break the other tests: use kubetest.Start(t) for a private one")
	}
	e.mu.Lock()
	p := e.apiserver
	e.apiserver = nil
	e.mu.Unlock()
	if p == nil {
		return errors.New("kubetest: kube-apiserver is not running")
	}
	return p.stop(10 * time.Second)
}

// StartAPIServer starts kube-apiserver again, on the same port with the same
// certificates, token and etcd, and returns once /readyz is ok.
func (e *Env) StartAPIServer() error {
	if e.shared {
		return errors.New("kubetest: StartAPIServer on the shared environment: use kubetest.Start(t) for a private one")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("kubetest: the environment is stopped")
	}
	if e.apiserver != nil {
		return errors.New("kubetest: kube-apiserver is already running")
	}
	t0 := time.Now()
	p, err := e.startAPIServer()
	if err != nil {
		return err
	}
	e.apiserver = p
	e.RestartTime = time.Since(t0)
	return nil
}

// Logs returns the last lines of etcd's and kube-apiserver's output, for a
// test that wants them in its failure message.
func (e *Env) Logs() string {
	return "kube-apiserver:\n" + tailFile(e.apiLog, tailLines) + "\netcd:\n" + tailFile(e.etcdLog, tailLines)
}

// APIServerPID returns the process id of the running kube-apiserver, or 0.
func (e *Env) APIServerPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.apiserver == nil {
		return 0
	}
	return e.apiserver.cmd.Process.Pid
}

// EtcdPID returns the process id of the running etcd, or 0.
func (e *Env) EtcdPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.etcd == nil {
		return 0
	}
	return e.etcd.cmd.Process.Pid
}

// stop kills both processes and removes Dir. Idempotent.
func (e *Env) stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil
	}
	e.stopped = true
	var errs []error
	// Nothing survives the environment, so no graceful shutdown is needed.
	if e.apiserver != nil {
		errs = append(errs, e.apiserver.stop(0))
		e.apiserver = nil
	}
	if e.etcd != nil {
		errs = append(errs, e.etcd.stop(0))
		e.etcd = nil
	}
	if e.Dir != "" {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// apiserverBinary finds kube-apiserver: SETPOINT_KUBE_APISERVER, else the
// cache of hack/testenv/kube-apiserver.sh for SETPOINT_KUBE_VERSION.
func apiserverBinary() (string, error) {
	if p := os.Getenv("SETPOINT_KUBE_APISERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("SETPOINT_KUBE_APISERVER=%s: %w (unset it to use the kube-apiserver that make testenv builds)", p, err)
		}
		return p, nil
	}
	ver := os.Getenv("SETPOINT_KUBE_VERSION")
	if ver == "" {
		ver = DefaultKubeVersion
	}
	root := os.Getenv("SETPOINT_TESTENV")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("kube-apiserver %s: finding the cache: %w (set SETPOINT_TESTENV)", ver, err)
			}
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "setpoint-testenv")
	}
	p := filepath.Join(root, "kube-apiserver", ver, "kube-apiserver")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("kube-apiserver %s not built (no %s): run make testenv", ver, p)
	}
	return p, nil
}
