package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/setpoint-dev/setpoint/engine/plan"
	"github.com/setpoint-dev/setpoint/engine/signals"
	promsource "github.com/setpoint-dev/setpoint/engine/signals/prometheus"
	promscrape "github.com/setpoint-dev/setpoint/engine/signals/scrape"
	k8sprov "github.com/setpoint-dev/setpoint/providers/kubernetes"
	"github.com/setpoint-dev/setpoint/providers/kubernetes/kstate"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine"
	"github.com/setpoint-dev/setpoint/engine/addrs"
	// The kinds the loop reconciles register their deciders.
	_ "github.com/setpoint-dev/setpoint/engine/kinds/all"
	"github.com/setpoint-dev/setpoint/engine/signals/embedded"
	"github.com/setpoint-dev/setpoint/engine/state"
	"github.com/setpoint-dev/setpoint/internal/confine"
	"github.com/setpoint-dev/setpoint/internal/version"
	"github.com/setpoint-dev/setpoint/providers"
	"github.com/setpoint-dev/setpoint/providers/plugin"
	"github.com/setpoint-dev/setpoint/providers/sim"
)

// builtIn are the providers this binary serves when re-executed as
// `setpoint provider serve NAME`.
var builtIn = map[string]func() providers.Full{
	"sim":        func() providers.Full { return sim.NewPlugin() },
	"kubernetes": func() providers.Full { return k8sprov.New() },
}

func builtInNames() []string {
	return slices.Sorted(maps.Keys(builtIn))
}

// workspace is a loaded spec directory with its providers and signals.
type workspace struct {
	dir       string
	env       *spec.Environment
	nfrs      []*spec.NFR
	specs     []spec.Document // every kind but the Environment
	diags     load.Diagnostics
	store     *embedded.Store
	providers map[string]providers.Full
	mgr       *plugin.Manager
	eng       *engine.Engine
	statePath string
	state     state.Backend
	// fence, when set, says whether the specs' changes may still be
	// applied by this process (in-cluster: it still holds their shards).
	fence func(specs []string) error
	// owns, when set (in a cluster), says whether a spec's shard is this
	// replica's: another's releases are left to it.
	owns func(spec string) bool
	// heldGone are the gone specs whose releases the last reconcile held
	// (in a cluster; the watch's worker alone uses it).
	heldGone []string
	// trace is the sim world's timeline (the world itself runs in its
	// provider process). now is when a one-shot plan looks: the sim
	// config's start on the sim world (a fixed virtual time), the wall
	// clock otherwise.
	trace *sim.Trace
	// simCfg is the sim config as the provider got it (absolute paths,
	// latency targets added): what sim's baselines rebuild the world from.
	simCfg spec.SimConfig
	now    time.Time
	// mu guards eng.Specs and eng.Env, which watch replaces per reconcile
	// while event goroutines read them.
	mu sync.Mutex
	// pods finds the annotated pods to scrape (with the kubernetes
	// provider); stopScrape ends watch's scrape loop and waits for it.
	pods       *k8sprov.PodDiscovery
	stopScrape func()
	// unlock gives up the lock holdLock took for the process's lifetime
	// (watch); while it is set, withState takes no lock of its own.
	unlock func() error
	// holder is this process as its lock file names it (file state held
	// by holdLock only): whom a release confirmation must be handed to.
	holder string
	// confirmWarned: an ignored confirmation was said once.
	confirmWarned bool
	// notes go into every plan of the workspace (a trusted Environment
	// used in place of the directory's).
	notes []plan.Note
}

// holdLock takes the state lock for as long as the workspace lives, so a
// second watch or an apply on the directory refuses, naming this process,
// instead of interleaving its ticks with this one's. In a cluster, the
// shard Leases are the lock (Lock then returns at once).
func (w *workspace) holdLock(ctx context.Context, who string) error {
	unlock, err := w.state.Lock(ctx, who, false)
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			return fmt.Errorf("another setpoint runs on this directory's state: %w", err)
		}
		return err
	}
	w.unlock = unlock
	if _, inCluster := w.state.(*kstate.Backend); !inCluster && w.statePath != "" {
		// Who this process is, as the lock file says: a release
		// confirmation is taken only when handed to this holder.
		if h := state.LockHolder(w.statePath); h != nil {
			w.holder = h.String()
		}
	}
	return nil
}

// readState loads the state without the lock and without saving, for a
// plan beside a running watch or in a pull request's CI job with read-only
// credentials: what the plan records (users' values, windows) is dropped.
func (w *workspace) readState(ctx context.Context) (*state.State, error) {
	st, err := w.state.Load(ctx)
	if err != nil {
		return nil, stateAdvice(err, w.dir)
	}
	return st, nil
}

// virtual reports whether the workspace runs on the sim world's virtual
// time.
func (w *workspace) virtual() bool { return w.trace != nil }

// clockNow is the time a one-shot command plans and applies at: the sim
// world's fixed view, or the wall clock now (after any wait for the lock).
func (w *workspace) clockNow() time.Time {
	if w.virtual() {
		return w.now
	}
	return time.Now()
}

// openWorkspace loads dir. Invalid specs are reported in diags and left
// out; the rest are planned. Only a missing or invalid Environment, or a
// provider that cannot start, stops it.
func openWorkspace(dir string, o simOptions) (*workspace, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s: no such spec directory", dir)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory (a spec directory is expected)", dir)
	}
	// The callers pass no context, yet an interrupt while the specs load
	// must stop the CUE child: listen for the signals main listens for, as
	// long as loading takes.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := newLoader(ctx, defaultCUELimits())
	if err != nil {
		return nil, err
	}
	r := l.LoadDir(dir)
	if ctx.Err() != nil {
		// Planning a part of the directory could release what the rest
		// owns.
		return nil, fmt.Errorf("%s: interrupted while loading the specs", dir)
	}
	o.oneShot = true
	// A one-shot command's sim world is its own: it runs inside, writing
	// into the store (SETPOINT_PROVIDERS=process runs it as a provider
	// process, as watch does).
	o.simInProcess = !o.simProcess && os.Getenv("SETPOINT_PROVIDERS") != "process"
	docs := r.Documents
	var note *plan.Note
	if o.trustedEnv != "" {
		if docs, note, err = withTrustedEnv(l, dir, o.trustedEnv, docs); err != nil {
			return nil, err
		}
	}
	w, err := workspaceFrom(dir, docs, r.Diags, o)
	if err != nil {
		return nil, err
	}
	if note != nil {
		w.notes = append(w.notes, *note)
	}
	return w, nil
}

// simOptions override the sim config (the sim command's flags).
type simOptions struct {
	trace     string
	rateScale float64
	seed      *int64 // replaces the sim config's seed
	fresh     bool   // ignore the sim state file: a self-contained run (sim's, which reports)
	// oneShot says the process plans once (openWorkspace's commands): it
	// scrapes when its queries first name metrics, where watch runs a
	// scrape loop beside its reconciles.
	oneShot bool
	// trustedEnv is a file whose Environment replaces the directory's
	// (plan --trusted-environment).
	trustedEnv string
	// simInProcess runs the sim provider inside this process (sim's
	// default: its world is the run's own, and a process boundary per
	// call was ~40% of the demo's time).
	simInProcess bool
	// simProcess asks for the sim provider as a provider process (sim
	// --provider-process) where a one-shot command would run it inside.
	simProcess bool
}

// selfPath overrides os.Executable as the binary serving built-in
// providers (tests run from a test binary, which cannot).
var selfPath string

func selfBinary() (string, error) {
	if selfPath != "" {
		return selfPath, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding the setpoint binary: %w", err)
	}
	return p, nil
}

// inProcess runs the built-in providers inside setpoint, for debugging and
// to measure what the process boundary costs.
func inProcess() bool { return os.Getenv("SETPOINT_PROVIDERS") == "in-process" }

func workspaceFrom(dir string, docs []spec.Document, diags load.Diagnostics, o simOptions) (*workspace, error) {
	w := &workspace{dir: dir, diags: diags, providers: map[string]providers.Full{}}
	for _, d := range docs {
		switch x := d.(type) {
		case *spec.Environment:
			if w.env == nil {
				w.env = x
			}
		case *spec.NFR:
			w.nfrs = append(w.nfrs, x)
			w.specs = append(w.specs, x)
		default:
			w.specs = append(w.specs, x)
		}
	}
	if w.env == nil {
		return nil, fmt.Errorf("%s: no valid Environment (setpoint validate %s says why)", dir, dir)
	}
	base := filepath.Dir(w.env.Src.Pos.File)
	envRoot := dir
	if o.trustedEnv != "" {
		// What a trusted Environment names is in its own tree.
		envRoot = base
	}
	root, err := confine.NewRoot(envRoot)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	paths, bad := resolveEnvPaths(root, w.env, trust)
	if len(bad) > 0 {
		msgs := make([]string, len(bad))
		for i, d := range bad {
			msgs[i] = d.Error()
		}
		return nil, errors.New(strings.Join(msgs, "\n"))
	}
	for _, p := range paths.refused {
		slog.Warn("pluginPath entry inside the spec directory is not searched (a pull request could place a binary there); pass --allow-spec-plugins to trust it", "entry", p)
	}
	w.statePath = paths.state
	w.state = state.NewFile(w.statePath)
	if w.env.Spec.State.Backend != "kubernetes" {
		warnStrayState(base, w.statePath)
	}
	// Without a sim world, time is the wall's.
	w.now = time.Now()
	var source signals.Source
	switch sig := w.env.Spec.Signals; sig.Default {
	case "embedded", "":
	case "prometheus":
		// The server's address is the Environment's; credentials are the
		// operator's (flags), never a spec's.
		cfg := promCreds
		cfg.URL, cfg.Timeout = sig.Prometheus.URL, sig.Prometheus.Timeout.D()
		ps, err := promsource.New(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.env.Src.PosOf("spec.signals.prometheus"), err)
		}
		source = ps
	default:
		return nil, fmt.Errorf("%s: signals.default %q is not available", w.env.Src.PosOf("spec.signals.default"), sig.Default)
	}
	if w.env.Spec.State.Backend == "kubernetes" {
		if w.state, err = clusterState(w.env); err != nil {
			return nil, fmt.Errorf("%s: %w", w.env.Src.PosOf("spec.state.backend"), err)
		}
	}
	self, err := selfBinary()
	if err != nil {
		return nil, err
	}
	w.mgr = &plugin.Manager{Self: self, BuiltIn: builtInNames(), Pins: map[string]string{}}
	w.mgr.PluginPath = paths.plugins
	w.mgr.Refused = paths.refused
	w.store = embedded.NewStore(0)
	var feeds []*engine.Feed
	provs := map[string]providers.Provider{}
	for i, p := range w.env.Spec.Providers {
		if p.SHA256 != "" {
			w.mgr.Pins[p.Name] = p.SHA256
		}
		cfg := providers.ConfigureRequest{Config: p.Config, BaseDir: base}
		if p.Name == "sim" {
			simCfg, err := sim.Config(w.env)
			if err != nil {
				return nil, err
			}
			// The provider gets absolute paths, checked here: it resolves
			// nothing against the spec directory itself.
			simCfg.Trace = paths.trace
			for j := range simCfg.Workloads {
				if j < len(paths.workloadTraces) && paths.workloadTraces[j] != "" {
					simCfg.Workloads[j].Trace = paths.workloadTraces[j]
				}
			}
			if o.trace != "" {
				simCfg.Trace, _ = filepath.Abs(o.trace)
			}
			addTargets(&simCfg, w.nfrs, w.env)
			if o.rateScale > 0 {
				simCfg.RateScale = o.rateScale
			}
			if o.seed != nil {
				simCfg.Seed = *o.seed
			}
			w.simCfg = simCfg
			if !inProcess() && !o.simInProcess {
				// For the provider process; a world inside takes it as is.
				if cfg.Config, err = json.Marshal(simCfg); err != nil {
					return nil, err
				}
			}
			if !o.fresh {
				cfg.StatePath = sim.StateFileBeside(w.statePath)
			}
			if w.trace, err = sim.TraceOf(simCfg, base); err != nil {
				return nil, fmt.Errorf("%s: %w", w.env.Src.PosOf("spec.providers"), err)
			}
			w.now = w.trace.Start.Add(simCfg.Start.D())
			if !o.fresh {
				// The world as the last process left it: a watch applied
				// changes at later virtual times, which a plan at start
				// would not see, and would plan again.
				last, err := sim.LastChangeAt(cfg.StatePath, w.trace)
				if err != nil {
					return nil, err
				}
				if last.After(w.now) {
					w.now = last
				}
			}
			cfg.Now = w.now
		}
		if p.Name == "kubernetes" {
			if cfg.Config, err = kubernetesConfig(); err != nil {
				return nil, err
			}
		}
		var prov providers.Full
		mk, builtin := builtIn[p.Name]
		switch {
		case builtin && p.Name == "sim" && (inProcess() || o.simInProcess):
			// The world writes straight into this process's store, from
			// the config and trace read here, and keeps its report only
			// for sim, which prints it.
			sp := sim.NewPluginWithSink(w.store)
			sp.NoReport = !o.fresh
			c := w.simCfg
			sim.AbsPaths(&c, base)
			if d := sp.Use(c, w.trace, cfg.StatePath); len(d) > 0 {
				return nil, fmt.Errorf("%s: provider %s: %s", w.env.Src.PosOf(fmt.Sprintf("spec.providers.%d", i)), p.Name, d[0].Error())
			}
			prov = sp
		case builtin && inProcess():
			prov = mk()
			if d := prov.Configure(context.Background(), cfg); len(d) > 0 {
				return nil, fmt.Errorf("%s: provider %s: %s", w.env.Src.PosOf(fmt.Sprintf("spec.providers.%d", i)), p.Name, d[0].Error())
			}
		default:
			prov = w.mgr.Provider(p.Name, &cfg)
			if err := w.mgr.Start(p.Name); err != nil {
				w.close()
				return nil, fmt.Errorf("%s: %w", w.env.Src.PosOf(fmt.Sprintf("spec.providers.%d.name", i)), err)
			}
		}
		w.providers[p.Name] = prov
		provs[p.Name] = prov
		if sc, _ := prov.Schema(context.Background()); sc.Signals {
			feeds = append(feeds, &engine.Feed{Provider: prov, Sink: &embedded.Ingestor{Store: w.store}})
		}
	}
	// A saved plan names its directory absolutely: it may be applied from
	// anywhere.
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if source == nil {
		source = embedded.NewSource(w.store).WithLookback(w.env.Spec.Signals.Lookback())
	}
	w.eng = &engine.Engine{Env: w.env, Specs: w.specs, Providers: provs, Feeds: feeds, Signals: source, Version: version.Version, Dir: absDir,
		Incomplete: diags.HasErrors()}
	if emb, ok := source.(*embedded.Source); ok {
		w.wireScraping(emb, o.oneShot)
	}
	return w, nil
}

// wireScraping makes the embedded store scrape the Environment's targets
// and, with the kubernetes provider, the annotated pods of the namespaces
// the specs target: on demand in a one-shot command, on a loop of its own
// beside watch's reconciles (which never wait for it).
func (w *workspace) wireScraping(src *embedded.Source, oneShot bool) {
	if w.virtual() {
		// Samples scraped now would be stamped with the wall clock, which
		// the sim world's plans never look at.
		if len(w.env.Spec.Signals.Scrape.Targets) > 0 {
			slog.Warn("scrape targets are not scraped on the sim world's virtual time", "at", w.env.Src.PosOf("spec.signals.scrape.targets").String())
		}
		return
	}
	if slices.ContainsFunc(w.env.Spec.Providers, func(p spec.Provider) bool { return p.Name == "kubernetes" }) {
		rc, err := k8sprov.RestConfig(k8sprov.Config{Kubeconfig: cluster.kubeconfig, Context: cluster.context, InCluster: cluster.inCluster})
		if err == nil {
			w.pods, err = k8sprov.NewPodDiscovery(rc)
		}
		if err != nil {
			slog.Warn("annotated pods are not scraped", "err", err)
		}
	}
	scraper := &promscrape.Scraper{Store: w.store}
	if oneShot {
		w.eng.Signals = &promscrape.OnDemand{Source: src, Scraper: scraper, Config: w.scrapeConfig}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	loop := &promscrape.Loop{Scraper: scraper, Config: w.scrapeConfig}
	go func() {
		defer close(done)
		loop.Run(ctx)
	}()
	w.stopScrape = func() { cancel(); <-done }
}

// scrapeConfig is what the store scrapes now: watch applies an edited
// Environment's targets and follows the specs' namespaces.
func (w *workspace) scrapeConfig(ctx context.Context) promscrape.Config {
	w.mu.Lock()
	sc := w.env.Spec.Signals.Scrape
	var namespaces []string
	if w.pods != nil {
		namespaces = w.namespacesOf("kubernetes")
	}
	w.mu.Unlock()
	cfg := promscrape.Config{Interval: sc.Every(), Timeout: sc.Within()}
	for _, t := range sc.Targets {
		cfg.Targets = append(cfg.Targets, promscrape.Target{URL: t.URL, Job: t.Job, Labels: t.Labels})
	}
	if len(namespaces) > 0 {
		for _, p := range w.pods.Targets(ctx, namespaces) {
			cfg.Targets = append(cfg.Targets, promscrape.Target{URL: p.URL, Job: k8sprov.PodJob, Instance: p.Instance,
				Labels: map[string]string{"namespace": p.Namespace, "pod": p.Pod}})
		}
	}
	return cfg
}

// namespacesOf lists the namespaces of the objects the specs read through
// provider; the caller holds w.mu.
func (w *workspace) namespacesOf(provider string) []string {
	def := w.eng.DefaultProvider()
	set := map[string]bool{}
	for _, d := range w.eng.Specs {
		dec, ok := engine.Lookup(d.Head().Kind)
		if !ok {
			continue
		}
		for _, a := range dec.Reads(d, def) {
			if a.Provider == provider && a.Namespace != "" {
				set[a.Namespace] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// readers lists the specs in force that read an object; safe from the
// event goroutines (the engine's specs change under the watch loop).
func (w *workspace) readers(a addrs.Object) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.eng.Readers(a)
}

// close stops the provider processes.
func (w *workspace) close() {
	if w.unlock != nil {
		_ = w.unlock()
		w.unlock = nil
	}
	if w.stopScrape != nil {
		w.stopScrape()
	}
	if w.mgr != nil {
		w.mgr.Close()
	}
}

// printDiags lists spec errors; they never stop the valid specs.
func (w *workspace) printDiags(out io.Writer) {
	for _, d := range w.diags {
		fmt.Fprintln(out, d.Error())
	}
	if len(w.diags) > 0 {
		fmt.Fprintf(out, "%s: those specs are left out of the plan\n", load.CountNoun(len(w.diags), "spec error"))
	}
}

// withState runs f under the state lock with the loaded state and saves
// the shards f changed. The lock is held only as long as f runs.
func (w *workspace) withState(ctx context.Context, who string, wait time.Duration, f func(*state.State) error) error {
	if w.unlock != nil {
		// This process holds the lock for its lifetime already (flock is
		// per open file: a second Lock here would refuse ourselves).
		return w.loadRunSave(ctx, f)
	}
	unlock, err := w.state.Lock(ctx, who, false)
	if errors.Is(err, state.ErrLocked) && wait > 0 {
		// Say so, as a long wait otherwise looks like a hang.
		slog.Info("waiting for the state lock", "held", err.Error(), "timeout", wait)
		lctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		unlock, err = w.state.Lock(lctx, who, true)
	}
	if err != nil {
		return adviseLockTimeout(err)
	}
	defer unlock()
	return w.loadRunSave(ctx, f)
}

// loadRunSave loads the state, runs f and saves what f changed; the lock
// is held.
func (w *workspace) loadRunSave(ctx context.Context, f func(*state.State) error) error {
	if hc, ok := w.state.(interface{ CheckHeld() error }); ok && w.unlock != nil {
		// Held for the process's life: still ours? (Nothing is applied
		// while another process might hold the state too.)
		if err := hc.CheckHeld(); err != nil {
			return stateLockLost{err}
		}
	}
	st, err := w.state.Load(ctx)
	if err != nil {
		return stateAdvice(err, w.dir)
	}
	confirm, confirmFile := w.takeConfirmation()
	defer func() {
		w.mu.Lock()
		w.eng.ConfirmGone = nil
		w.mu.Unlock()
	}()
	if err := f(st); err != nil {
		return err
	}
	// An interrupt must not drop the record of what was applied: once f
	// ran, the save goes through (a provider call has its own timeout).
	if _, err = w.state.Save(context.WithoutCancel(ctx), st); err != nil {
		return err
	}
	w.mu.Lock()
	taken := confirm != "" && w.eng.ConfirmGone == nil
	w.mu.Unlock()
	if taken {
		// In the state now: the confirmation was one shot. Removed only if
		// it is still the one read: a newer one handed over meanwhile is
		// taken at the next reconcile, not lost.
		if fi, err := os.Lstat(confirm); err == nil && os.SameFile(fi, confirmFile) {
			if err := os.Remove(confirm); err != nil && !errors.Is(err, fs.ErrNotExist) {
				slog.Warn("removing the release confirmation", "file", confirm, "error", err)
			}
		}
		slog.Info("release confirmation taken", "file", confirm)
	}
	return nil
}

// warnStrayState warns when the state file holds nothing while a state
// exists where states are usually kept (the Environment's .setpoint/ and
// the state file's own directory): state.path was changed, and starting
// fresh would adopt setpoint's own values as the users'.
func warnStrayState(base, statePath string) {
	hasShards := func(dir string) bool {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		for _, e := range ents {
			if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".json") {
				return true
			}
		}
		return false
	}
	mine := statePath + state.ShardDirSuffix
	if hasShards(mine) {
		return
	}
	var found []string
	for _, d := range []string{filepath.Join(base, ".setpoint"), filepath.Dir(statePath)} {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			p := filepath.Join(d, e.Name())
			if e.IsDir() && strings.HasSuffix(e.Name(), ".json"+state.ShardDirSuffix) && p != mine && !slices.Contains(found, p) && hasShards(p) {
				found = append(found, p)
			}
		}
	}
	for _, p := range found {
		slog.Warn("state.path holds no state, but a state exists elsewhere: if state.path changed, move that state to it or set state.path back; otherwise setpoint starts fresh and adopts every current value (its own earlier writes included) as the user's",
			"state", statePath, "found", strings.TrimSuffix(p, state.ShardDirSuffix))
	}
}

// confirmation is what setpoint state confirm-release hands over.
type confirmation struct {
	Specs []string  `json:"specs"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	// Holder is the process it is handed to, as the lock file named it
	// when the confirmation was made: a file that names another (a stale
	// one, or one committed to the spec directory) is not taken.
	Holder string `json:"holder"`
}

// takeConfirmation reads a confirmation handed over to this process (a
// watch holding the file state for its lifetime) into the engine, and
// returns its path and what the file was ("" when there is none for it).
func (w *workspace) takeConfirmation() (string, fs.FileInfo) {
	if w.unlock == nil || w.holder == "" {
		return "", nil
	}
	p := state.ConfirmPath(w.statePath)
	b, fi, err := confine.ReadRegular(p, 1<<20, true)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	var c confirmation
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err == nil && c.Holder != w.holder {
		err = fmt.Errorf("it is handed to %q, not to this process (%s)", c.Holder, w.holder)
	}
	if err != nil {
		if !w.confirmWarned {
			slog.Warn("a release confirmation is ignored", "file", p, "error", err)
			w.confirmWarned = true
		}
		return "", nil
	}
	w.confirmWarned = false
	set := map[string]bool{}
	for _, id := range c.Specs {
		set[id] = true
	}
	w.mu.Lock()
	w.eng.ConfirmGone = set
	w.mu.Unlock()
	return p, fi
}

// addTargets puts each NFR's p99 target into the sim workload it targets,
// so the world's histogram has a bucket at the target (a p99 read from
// buckets around it is a guess) and its report counts the requests over it.
func addTargets(cfg *spec.SimConfig, nfrs []*spec.NFR, env *spec.Environment) {
	def := ""
	if len(env.Spec.Providers) > 0 {
		def = env.Spec.Providers[0].Name
	}
	type key struct{ kind, namespace, name string }
	byKey := make(map[key][]int, len(cfg.Workloads))
	for i, wl := range cfg.Workloads {
		k := key{wl.Kind, wl.Namespace, wl.Name}
		byKey[k] = append(byKey[k], i)
	}
	for _, n := range nfrs {
		if n.Spec.Latency == nil {
			continue
		}
		prov := n.Spec.Target.Provider
		if prov == "" {
			prov = def
		}
		if prov != "sim" {
			continue
		}
		for _, i := range byKey[key{n.Spec.Target.Kind, n.Metadata.Namespace, n.Spec.Target.Name}] {
			if wl := &cfg.Workloads[i]; !slices.Contains(wl.Targets, n.Spec.Latency.P99) {
				wl.Targets = append(wl.Targets, n.Spec.Latency.P99)
			}
		}
	}
}

// refuseAll fails every change of p for why.
func refuseAll(p *plan.Plan, why error) []engine.Result {
	out := make([]engine.Result, len(p.Changes))
	for i, c := range p.Changes {
		out[i] = engine.Result{Change: c, Err: fmt.Sprintf("%s: %s %s: %v", c.SpecPos, c.Address, c.Attribute, why)}
	}
	slog.Error("not applied", "changes", len(p.Changes), "why", why)
	return out
}

// apply applies a plan the way every command does: the state as the plan
// left it (the users' values it adopted, the gate's windows) is saved
// first with the intent journal, so a process killed while the provider
// applies loses nothing it learned and the next run settles what it did.
// A change whose journal mark could not be saved is not applied. Then the
// changes, whose record the caller's save writes.
func (w *workspace) apply(ctx context.Context, now time.Time, p *plan.Plan, st *state.State) []engine.Result {
	refuse := func(why error) []engine.Result { return refuseAll(p, why) }
	// The journal: what is about to be done is saved before it is done,
	// so a kill while the provider applies is settled by the next run.
	engine.Journal(p, st, now)
	if _, err := w.state.Save(ctx, st); errors.Is(err, kstate.ErrConflict) {
		// Another writer got there first: applying now could act twice.
		return refuse(fmt.Errorf("saving the state before applying: %w", err))
	} else if err != nil {
		// A shard it cannot write must not stop the others, but a change
		// whose journal mark is not durable is not applied: a kill after
		// the provider's call would leave nothing to settle it by.
		slog.Warn("saving the state before applying", "err", err)
		durable, lerr := w.state.Load(ctx)
		if durable == nil {
			return refuse(fmt.Errorf("saving the journal before applying: %w (and reading it back: %v)", err, lerr))
		}
		ok := engine.Journaled(p, durable)
		kept := *p
		kept.Changes = nil
		var out []engine.Result
		for i, c := range p.Changes {
			if ok[i] {
				kept.Changes = append(kept.Changes, c)
				continue
			}
			out = append(out, engine.Result{Change: c, Err: fmt.Sprintf("%s: %s %s: not applied: its journal could not be saved: %v", c.SpecPos, c.Address, c.Attribute, err)})
		}
		if len(out) > 0 {
			slog.Error("not applied: the journal could not be saved", "changes", len(out), "error", err)
			return append(out, w.applyJournaled(ctx, now, &kept, st)...)
		}
	}
	return w.applyJournaled(ctx, now, p, st)
}

// applyJournaled fences and applies changes whose journal is saved.
func (w *workspace) applyJournaled(ctx context.Context, now time.Time, p *plan.Plan, st *state.State) []engine.Result {
	refuse := func(why error) []engine.Result { return refuseAll(p, why) }
	if len(p.Changes) == 0 {
		return nil
	}
	if w.fence != nil {
		var specs []string
		for _, c := range p.Changes {
			specs = append(specs, c.Spec)
			specs = append(specs, c.By...)
		}
		if err := w.fence(specs); err != nil {
			return refuse(err)
		}
	}
	if os.Getenv(crashBeforeProviderEnv) == "1" {
		// Crash tests: die as a kill between the journal's save and the
		// provider's apply would.
		os.Exit(crashExitCode)
	}
	results := w.eng.Apply(ctx, now, p, st)
	if os.Getenv(crashAfterApplyEnv) == "1" {
		// Crash tests: die as a kill between the provider's apply and the
		// state's save would.
		os.Exit(crashExitCode)
	}
	return results
}

// crashAfterApplyEnv makes apply exit right after the provider applied,
// before the state records it: for tests of what a successor does then.
const crashAfterApplyEnv = "SETPOINT_TEST_CRASH_AFTER_APPLY"

// crashBeforeProviderEnv makes apply exit once the journal is saved, before
// any provider is called.
const crashBeforeProviderEnv = "SETPOINT_TEST_CRASH_BEFORE_PROVIDER"

const crashExitCode = 86
