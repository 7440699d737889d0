package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/providers"
)

// Manager starts provider processes lazily, reuses them across ticks,
// restarts one that died (with backoff; the next call after the backoff
// starts it again and configures it as before), and stops them all on
// Close. Built-in providers are the setpoint binary re-executed as
// `setpoint provider serve NAME`; others are setpoint-provider-NAME on the
// plugin path.
type Manager struct {
	// Self is the setpoint binary (os.Executable), for built-in providers.
	Self string
	// BuiltIn names the providers Self serves.
	BuiltIn []string
	// PluginPath is searched for setpoint-provider-NAME binaries.
	PluginPath []string
	// Refused are plugin path entries left out of the search (inside the
	// spec directory, where a pull request could place a binary); a
	// provider found only there is reported with the way to allow it.
	Refused []string
	// Pins maps a provider name to the SHA-256 its binary must have.
	Pins    map[string]string
	Timeout time.Duration
	// RestartBackoff says how long to wait, after n consecutive failures
	// of a provider (n ≥ 1), before starting it again. It is consulted at
	// each call, measured from the last failure. Nil: 1 s, 2 s, 4 s … at
	// most 30 s.
	RestartBackoff func(n int) time.Duration
	// SocketDir is where provider sockets are made ("": os.TempDir()).
	SocketDir string

	// clock is the time the restart backoff is measured on (nil: the
	// wall), a seam for tests.
	clock func() time.Time

	mu    sync.Mutex
	procs map[string]*proc
	run   string   // this manager's socket directory (sockets.go)
	owner *os.File // holds the lock that says run is alive
}

type proc struct {
	name     string
	cfg      *providers.ConfigureRequest
	client   *goplugin.Client
	c        *Client
	failures int
	failedAt time.Time
	lastErr  error
}

// Found is a provider the manager can start.
type Found struct {
	Name    string
	Path    string
	BuiltIn bool
}

// Find locates a provider by name.
func (m *Manager) Find(name string) (Found, error) {
	for _, b := range m.BuiltIn {
		if b == name {
			return Found{Name: name, Path: m.Self, BuiltIn: true}, nil
		}
	}
	bin := "setpoint-provider-" + name
	// A file that is there but cannot run is named as such: "not found"
	// would send the user looking for a file they can see.
	var unusable []string
	for _, dir := range m.PluginPath {
		// Absolute, so what runs is the file checked (and pinned): a bare
		// name would be looked up on $PATH.
		p, err := filepath.Abs(filepath.Join(dir, bin))
		if err != nil {
			continue
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			unusable = append(unusable, p+" is a directory")
		case !fi.Mode().IsRegular():
			unusable = append(unusable, p+" is not a regular file")
		case fi.Mode()&0o111 == 0:
			unusable = append(unusable, fmt.Sprintf("%s is not executable (mode %v; chmod +x it)", p, fi.Mode().Perm()))
		default:
			return Found{Name: name, Path: p}, nil
		}
	}
	if len(unusable) > 0 {
		return Found{}, fmt.Errorf("provider %q cannot run: %s", name, strings.Join(unusable, "; "))
	}
	for _, dir := range m.Refused {
		if _, err := os.Stat(filepath.Join(dir, bin)); err == nil {
			return Found{}, fmt.Errorf("provider %q: %s is in pluginPath entry %s, inside the spec directory, which is not searched unless setpoint runs with --allow-spec-plugins", name, bin, dir)
		}
	}
	notSearched := ""
	if len(m.Refused) > 0 {
		notSearched = fmt.Sprintf(" (not searched, being inside the spec directory: [%s])", strings.Join(m.Refused, ", "))
	}
	return Found{}, fmt.Errorf("unknown provider %q: not built in (%s) and no %s on the plugin path [%s]%s", name, strings.Join(m.BuiltIn, ", "), bin, strings.Join(m.PluginPath, ", "), notSearched)
}

// List returns every provider found: the built-in ones and the binaries on
// the plugin path.
func (m *Manager) List() []Found {
	var out []Found
	for _, b := range m.BuiltIn {
		out = append(out, Found{Name: b, Path: m.Self, BuiltIn: true})
	}
	seen := map[string]bool{}
	for _, dir := range m.PluginPath {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), "setpoint-provider-")
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			p, err := filepath.Abs(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			out = append(out, Found{Name: name, Path: p})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// start launches one provider process and returns its client.
func (m *Manager) start(p *proc) error {
	f, err := m.Find(p.name)
	if err != nil {
		return err
	}
	args := []string{}
	if f.BuiltIn {
		args = []string{"provider", "serve", p.name}
	}
	sockets, err := m.runDir()
	if err != nil {
		return err
	}
	cmd := exec.Command(f.Path, args...)
	// go-plugin's server makes its socket in this directory (the client's
	// UnixSocketConfig.TempDir is honoured only with a custom runner).
	// The host environment is passed here rather than by go-plugin, so that
	// an inherited value cannot override this one.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, goplugin.EnvUnixSocketDir+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, goplugin.EnvUnixSocketDir+"="+sockets)
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  goplugin.HandshakeConfig{MagicCookieKey: Handshake.MagicCookieKey, MagicCookieValue: Handshake.MagicCookieValue},
		VersionedPlugins: map[int]goplugin.PluginSet{ProtocolVersion: {pluginName: &grpcPlugin{}}},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: p.name, Output: slogWriter{provider: p.name}, JSONFormat: true, Level: hclog.Info}),
		GRPCDialOptions:  []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessage), grpc.MaxCallSendMsgSize(MaxMessage))},
		StartTimeout:     15 * time.Second,
	}
	if pin := m.Pins[p.name]; pin != "" {
		sum, err := hex.DecodeString(pin)
		if err != nil || len(sum) != sha256.Size {
			return fmt.Errorf("provider %s: sha256 pin %q is not 64 hex digits", p.name, pin)
		}
		cfg.SecureConfig = &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	// The child is killed when setpoint dies, however it dies (a parent
	// killed with SIGKILL cannot stop it); the child also watches for it.
	cfg.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	client := goplugin.NewClient(cfg)
	rpc, err := client.Client()
	if err != nil {
		client.Kill()
		return fmt.Errorf("starting provider %s (%s): %w", p.name, f.Path, explain(err))
	}
	raw, err := rpc.Dispense(pluginName)
	if err != nil {
		client.Kill()
		return fmt.Errorf("starting provider %s: %w", p.name, err)
	}
	c := raw.(*Client)
	c.Name, c.Timeout = p.name, m.Timeout
	if p.cfg != nil {
		if diags := c.Configure(context.Background(), *p.cfg); hasError(diags) {
			client.Kill()
			return fmt.Errorf("configuring provider %s: %s", p.name, diagText(diags))
		}
	}
	p.client, p.c = client, c
	slog.Debug("provider started", "provider", p.name, "path", f.Path)
	return nil
}

// pluginVersion finds the provider's version in go-plugin's error.
var pluginVersion = regexp.MustCompile(`(?i)plugin version: (\d+)`)

// explain makes go-plugin's errors say what a user can do.
func explain(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "checksums did not match"):
		return fmt.Errorf("the binary does not match its sha256 pin in the Environment: %w", err)
	case strings.Contains(strings.ToLower(msg), "incompatible api version"):
		theirs := "another version"
		if m := pluginVersion.FindStringSubmatch(msg); m != nil {
			theirs = "version " + m[1]
		}
		return fmt.Errorf("protocol version mismatch: setpoint speaks provider protocol version %d, the provider speaks %s: %w", ProtocolVersion, theirs, err)
	}
	return err
}

func hasError(ds []providers.Diagnostic) bool { return diag.Diagnostics(ds).HasErrors() }

func diagText(ds []providers.Diagnostic) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, d.Error())
	}
	return strings.Join(parts, "; ")
}

// backoff after n consecutive failures: 1 s, 2 s, 4 s … at most 30 s.
func backoff(n int) time.Duration {
	d := time.Second << min(max(n, 1)-1, 5)
	return min(d, 30*time.Second)
}

func (m *Manager) backoff(n int) time.Duration {
	if m.RestartBackoff != nil {
		return m.RestartBackoff(n)
	}
	return backoff(n)
}

func (m *Manager) now() time.Time {
	if m.clock != nil {
		return m.clock()
	}
	return time.Now()
}

// fail counts one failure of p (m.mu held).
func (m *Manager) fail(p *proc, err error) {
	p.failures++
	p.lastErr = err
	p.failedAt = m.now()
}

// get returns a live client, starting the process if needed.
func (m *Manager) get(name string) (*Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.procs == nil {
		m.procs = map[string]*proc{}
	}
	p := m.procs[name]
	if p == nil {
		p = &proc{name: name}
		m.procs[name] = p
	}
	if p.client != nil && !p.client.Exited() {
		return p.c, nil
	}
	if p.client != nil {
		// It died: count it, and wait out the backoff before a restart.
		p.client.Kill()
		p.client, p.c = nil, nil
		m.fail(p, errors.New("the provider process exited"))
		slog.Warn("provider stopped; restarting after backoff", "provider", name, "backoff", m.backoff(p.failures))
	}
	if p.failures > 0 {
		if wait := p.failedAt.Add(m.backoff(p.failures)).Sub(m.now()); wait > 0 {
			// The same text for every call of one backoff (the restart's
			// time, not the time left), so repeated log lines collapse.
			times, last := "once", ""
			if p.failures > 1 {
				times = fmt.Sprintf("%d times", p.failures)
			}
			if p.lastErr != nil {
				last = "; last error: " + p.lastErr.Error()
			}
			return nil, fmt.Errorf("provider %s is down; it restarts at %s (failed %s in a row%s)", name, p.failedAt.Add(m.backoff(p.failures)).Format("15:04:05.000"), times, last)
		}
	}
	if err := m.start(p); err != nil {
		m.fail(p, err)
		return nil, err
	}
	return p.c, nil
}

// healthy resets the failure count after a successful call.
func (m *Manager) healthy(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.procs[name]; p != nil {
		p.failures = 0
	}
}

// markDead kills a provider whose connection broke, so the next call
// restarts it after the backoff.
func (m *Manager) markDead(name string, c *Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.procs[name]
	if p == nil || p.c != c || p.client == nil {
		return
	}
	p.client.Kill()
	p.client, p.c = nil, nil
	m.fail(p, errors.New("the connection to the provider broke"))
	slog.Warn("provider stopped; restarting after backoff", "provider", name, "backoff", m.backoff(p.failures))
}

// Pid returns a running provider's process id (tests kill it).
func (m *Manager) Pid(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.procs[name]; p != nil && p.client != nil {
		if rc := p.client.ReattachConfig(); rc != nil {
			return rc.Pid
		}
	}
	return 0
}

// Close stops every provider process.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		if p.client != nil {
			p.client.Kill()
			p.client = nil
		}
	}
	m.closeRunDir()
}

// Provider returns a handle for a provider: every call goes to the live
// process, starting or restarting it as needed. cfg is sent on every start.
func (m *Manager) Provider(name string, cfg *providers.ConfigureRequest) providers.Full {
	m.mu.Lock()
	if m.procs == nil {
		m.procs = map[string]*proc{}
	}
	if m.procs[name] == nil {
		m.procs[name] = &proc{name: name}
	}
	m.procs[name].cfg = cfg
	m.mu.Unlock()
	return &handle{m: m, name: name}
}

// Start starts a provider now (rather than at its first call), to report a
// provider that cannot start before anything else happens.
func (m *Manager) Start(name string) error {
	_, err := m.get(name)
	return err
}

type handle struct {
	m    *Manager
	name string
}

var errDown = errors.New("provider unavailable")

func (h *handle) unavailable(err error) []providers.Diagnostic {
	return []providers.Diagnostic{{Severity: providers.Error, Message: fmt.Sprintf("provider %s is unavailable", h.name), Detail: err.Error()}}
}

// unavailableResults fails every change of a batch that could not be sent.
func (h *handle) unavailableResults(changes []providers.ObjectChange, err error) []providers.ObjectResult {
	out := make([]providers.ObjectResult, len(changes))
	for i, ch := range changes {
		out[i] = providers.ObjectResult{Address: ch.Address, Err: fmt.Sprintf("provider %s is unavailable: %v", h.name, err)}
	}
	return out
}

// done notes how a call went: a healthy call resets the failure count; a
// broken transport means the process is gone, even if go-plugin has not
// noticed yet.
func (h *handle) done(c *Client, diags []providers.Diagnostic) {
	if c.broken.Load() {
		h.m.markDead(h.name, c)
		return
	}
	if !hasError(diags) {
		h.m.healthy(h.name)
	}
}

func (h *handle) Schema(ctx context.Context) (providers.Schema, []providers.Diagnostic) {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.Schema{}, h.unavailable(err)
	}
	return c.Schema(ctx)
}

func (h *handle) Configure(ctx context.Context, req providers.ConfigureRequest) []providers.Diagnostic {
	h.m.mu.Lock()
	h.m.procs[h.name].cfg = &req
	h.m.mu.Unlock()
	c, err := h.m.get(h.name)
	if err != nil {
		return h.unavailable(err)
	}
	return c.Configure(ctx, req)
}

func (h *handle) Read(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.ReadResponse{Diagnostics: h.unavailable(err)}
	}
	r := c.Read(ctx, req)
	h.done(c, r.Diagnostics)
	return r
}

func (h *handle) List(ctx context.Context, req providers.ListRequest) providers.ListResponse {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.ListResponse{Diagnostics: h.unavailable(err)}
	}
	r := c.List(ctx, req)
	h.done(c, r.Diagnostics)
	return r
}

func (h *handle) PlanChange(ctx context.Context, req providers.PlanChangeRequest) providers.PlanChangeResponse {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.PlanChangeResponse{Results: h.unavailableResults(req.Changes, err), Diagnostics: h.unavailable(err)}
	}
	r := c.PlanChange(ctx, req)
	h.done(c, r.Diagnostics)
	return r
}

func (h *handle) Apply(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.ApplyResponse{Results: h.unavailableResults(req.Changes, err), Diagnostics: h.unavailable(err)}
	}
	r := c.Apply(ctx, req)
	h.done(c, r.Diagnostics)
	return r
}

func (h *handle) Signals(ctx context.Context, req providers.SignalsRequest) providers.SignalsResponse {
	c, err := h.m.get(h.name)
	if err != nil {
		return providers.SignalsResponse{Cursor: req.Cursor, Instance: req.Instance, Diagnostics: h.unavailable(err)}
	}
	r := c.Signals(ctx, req)
	h.done(c, r.Diagnostics)
	return r
}

func (h *handle) Events(ctx context.Context, now time.Time, send func(providers.Event) error) error {
	c, err := h.m.get(h.name)
	if err != nil {
		return fmt.Errorf("%w: %v", errDown, err)
	}
	return c.Events(ctx, now, send)
}
