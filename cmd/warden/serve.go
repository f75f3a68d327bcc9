package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/gcheadroom"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// serveConfig runs warden with its configuration until it stops.
func serveConfig(c config.Serve, stderr io.Writer) error {
	log := newLogger(c, stderr)
	if c.EtcdEmbed && c.EtcdPlaintext {
		log.Warn("etcd without TLS (--etcd-plaintext): anyone on this machine can read and write every record; for tests only")
	}
	if c.EtcdOnly {
		return serveEtcdOnly(c, log)
	}
	p := &process{c: c, log: log}
	defer p.release()
	if err := p.start(); err != nil {
		return err
	}
	return p.run()
}

// newLogger is the process's structured log at its --log-level.
func newLogger(c config.Serve, stderr io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.LogLevel}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// process is one `warden serve`: what it holds from start to stop.
type process struct {
	c       config.Serve
	log     *slog.Logger
	lock    *dirLock
	stopCPU func()
	stopGC  func()
	srv     *http.Server
	served  chan error
	live    atomic.Pointer[http.Handler]
	store   *persistence.Store
	sealer  *trust.Sealer
	cp      *clusterParts
	node    *cluster.Node
	sys     *actors.System
	// stored: stop has dealt with the store (closed it, or left a sealed
	// one alone).
	stored bool
	// fds is how the process's descriptors are split, and drv
	// the drivers' share of them.
	fds fdBudget
	drv *driver.Descriptors
}

// start takes the data directory, listens (503 until ready), opens the
// store and starts the actors and the API.
func (p *process) start() error {
	c := p.c
	// Keys and modes are checked before anything listens: a refusal
	// is a clean exit with the command that fixes it.
	var err error
	if c.BenchNoop && !floorsBuilt {
		return fmt.Errorf("--bench-noop: this warden has no benchmark floors; make bench builds one with them (go build -tags benchfloor ./cmd/warden)")
	}
	if p.lock, err = takeDataDir(c.Data); err != nil {
		return err
	}
	if err := p.startProfile(); err != nil {
		return err
	}
	p.tuneGC()
	tm, err := loadTrust(c, p.log)
	if err != nil {
		return err
	}
	if err := p.listen(); err != nil {
		return err
	}
	if err := p.openStore(tm); err != nil {
		return err
	}
	// A store a newer warden wrote is refused before anything reads it;
	// a cluster node stamps the record when it takes shard 0.
	if p.node != nil {
		if _, err := p.store.RefuseNewer(buildinfo.Read().Short()); err != nil {
			return err
		}
	} else if err := p.store.CheckFormat(buildinfo.Read().Short()); err != nil {
		return err
	} else if err := checkSealKeys(p.store, tm.seal, keyPath(c.SealKeyFile, c.Data, sealKeyName)); err != nil {
		return err
	}
	cfg, err := p.systemConfig(tm)
	if err != nil {
		return err
	}
	if p.sys, err = actors.Start(cfg); err != nil {
		return err
	}
	p.preparePlatform()
	p.serveAPI(tm)
	return nil
}

// checkSealKeys refuses, before warden is ready, a keyring that cannot
// open every secret the store holds: ready and then 500 for every
// marquee sealed under a key it lacks would be a promise warden cannot
// keep. The store is damaged for this keyring: 65, naming the ids.
func checkSealKeys(st *persistence.Store, ring *trust.Keyring, path string) error {
	ids, err := actors.SealKeyIDs(st)
	if err != nil {
		return err
	}
	var missing, held []string
	for _, id := range ids {
		if _, ok := ring.Find(id); !ok {
			missing = append(missing, id)
		}
	}
	for _, k := range ring.Keys {
		held = append(held, k.ID)
	}
	if len(missing) == 0 {
		return nil
	}
	return statusError{exitCorrupt, fmt.Errorf("the store's secrets are sealed under key id(s) %s, which the seal keyring %s does not hold (it holds %s): "+
		"start with the keyring that does (--seal-key-file), e.g. the one kept with a backup of this store; nothing was served",
		strings.Join(missing, ", "), path, strings.Join(held, ", "))}
}

// preparePlatform readies the local platform's parts that are not a
// preview's own: Caddy's catch-all page for hosts with no preview.
// A Caddy that does not answer yet is said and left to the first
// activation, which adds the page too.
func (p *process) preparePlatform() {
	if p.c.EnvPlatform != "local" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.c.Platform.Prepare(ctx); err != nil {
		p.log.Warn("local platform: Caddy not prepared yet (its page for hosts with no preview, the previews' access log); the first route prepares it", "err", err)
	}
}

// gcHeadroom is how much the heap may grow between two collections
// however small the live heap: a tenth of the durable path's CPU went to
// collecting a 7 MiB heap ten times a second (docs/decisions, "The durable
// path's CPU"). It costs at most this much memory.
const gcHeadroom = 64 << 20

// tuneGC keeps collections gcHeadroom apart, unless GOGC is set: the
// operator's choice of the Go runtime's own setting wins.
func (p *process) tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		p.stopGC = gcheadroom.Start(gcHeadroom)
	}
}

// startProfile writes a CPU profile when asked (the benchmark's profile):
// of the whole run, or from --cpu-profile-after on, which leaves out the
// start-up and the first growth of the store's memtables (their first
// touch of fresh memory is a transient, not the steady cost).
func (p *process) startProfile() error {
	if p.c.CPUProfile == "" {
		return nil
	}
	f, err := os.Create(p.c.CPUProfile)
	if err != nil {
		return fmt.Errorf("--cpu-profile: %w", err)
	}
	var mu sync.Mutex
	started, stopped := false, false
	start := func() error {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return nil
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		started = true
		return nil
	}
	p.stopCPU = func() {
		mu.Lock()
		defer mu.Unlock()
		if started {
			pprof.StopCPUProfile()
		}
		stopped = true
		f.Close()
	}
	if p.c.CPUProfileAfter <= 0 {
		if err := start(); err != nil {
			f.Close()
			return err
		}
		return nil
	}
	time.AfterFunc(p.c.CPUProfileAfter, func() {
		if err := start(); err != nil {
			p.log.Warn("CPU profile not started", "err", err)
		}
	})
	return nil
}

// listen serves at once: /healthz answers, everything else is 503 with
// Retry-After until recovery has finished (/readyz).
func (p *process) listen() error {
	fds, err := planDescriptors()
	if err != nil {
		return err
	}
	fds.log(p.log)
	p.fds, p.drv = fds, driver.NewDescriptors(fds.driverDescriptors())
	// The local platform's podman commands and connections, its Prepare's
	// included, spend the same share.
	p.c.Platform.Descriptors = p.drv
	if err := persistence.HoldDescriptors(spareWAL); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", p.c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ln, _ = httpapi.LimitConns(ln, fds.conns())
	p.srv = httpapi.NewHTTPServer(p.c.Listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := p.live.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{\"status\":\"ok\"}\n")
			return
		}
		httpapi.Unavailable(w, "recovering")
	}))
	p.served = make(chan error, 1)
	go func() { p.served <- httpapi.Serve(p.srv, ln) }()
	p.log.Info("listening", "addr", ln.Addr().String())
	return nil
}

// openStore opens Pebble (or, on a cluster node, etcd and the node). A
// store that cannot be written opens read-only; a damaged one is
// refused with what to do.
func (p *process) openStore(tm *trustMaterial) error {
	c := p.c
	p.sealer = trust.NewSealer(tm.seal)
	if c.Node == "" {
		var err error
		p.store, err = persistence.Open(c.Data, persistence.Options{Logger: p.log,
			Degrade: true, AcceptDataLoss: c.AcceptDataLoss, MaxOpenFiles: p.fds.storeTables})
		return err
	}
	cp, err := openCluster(c, p.log)
	if err != nil {
		return err
	}
	p.cp, p.store = cp, cp.store
	p.node = cluster.NewNode(cluster.Config{Name: c.Node, URL: advertiseURL(c), TTL: c.LeaseTTL, Coordinator: cluster.Etcd{C: cp.client}, Clock: clock.Real{}, Log: p.log, Hooks: cluster.Hooks{
		// The node ticks only once sys is running (node.Run in run).
		Acquired: func(shard int, _ int64) {
			p.sys.AcquireShard(shard)
			if shard == formatShard {
				// Off the node's tick: a store round trip there would
				// delay every lease the tick keeps.
				go p.stampFormat()
			}
		},
		Released: func(shard int) { p.sys.ReleaseShard(shard) },
	}})
	p.node.SetPeers(c.ClusterToken)
	return nil
}

// formatShard is the shard whose owner writes a cluster's store format
// record, fenced like every cluster write.
const formatShard = 0

// stampFormat records, as the owner of formatShard, that this build writes
// the cluster's store; a failure is logged (the next owner stamps it).
func (p *process) stampFormat() {
	this := buildinfo.Read().Short()
	f, err := p.store.Format()
	if err == nil && f.WrittenBy == this {
		return
	}
	fence, err := p.node.Fence(formatShard)
	if err == nil {
		err = p.store.StampFormat(this, fence)
	}
	if err != nil {
		p.log.Warn("store format not recorded", "err", err)
	}
}

func (p *process) systemConfig(tm *trustMaterial) (actors.Config, error) {
	c := p.c
	env, err := envConfig(c, p.drv)
	if err != nil {
		return actors.Config{}, err
	}
	cfg := actors.Config{
		Store:          p.store,
		Sealer:         p.sealer,
		Clock:          clock.Real{},
		Machine:        marquee.Machine{Config: c.Rules},
		Pools:          c.Pools,
		DedupRetention: c.DedupRetention,
		Dispatcher:     dispatcher(c, p.drv),
		Bootstrapper:   bootstrapper(c, p.drv),
		ControlPlane:   &driver.HTTPControlPlane{URL: c.ControlPlaneURL, Token: c.ControlPlaneToken, Client: &http.Client{Timeout: 10 * time.Second, Transport: p.drv.Transport()}},
		CallbackURL:    strings.TrimRight(c.PublicURL, "/") + "/v1/webhooks/terraform",
		// Scoped credentials are minted only when the mode is on.
		CallbackKeys:     callbackKeys(c, tm),
		CallbackTokenTTL: c.CallbackTokenTTL,
		Logger:           p.log,
		RestartLimit:     c.RestartLimit,
		RestartWindow:    c.RestartWindow,
		IdleAfter:        c.IdleAfter,
		Secrets:          append([]string{c.CallbackToken, c.OperatorToken, c.GitHubToken, c.ControlPlaneToken}, dsnPassword(c.Platform.PostgresAdmin)...),
		Env:              env,
		Reserve:          persistence.Reserve{Dir: c.Data, Bytes: c.StorageReserve},
	}
	if p.node != nil {
		cfg.Cluster = p.node
	}
	return cfg, nil
}

// dsnPassword is a connection string's password, a secret never shown.
func dsnPassword(dsn string) []string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			return []string{pw}
		}
	}
	return nil
}

// serveAPI puts the API in front of the started system.
func (p *process) serveAPI(tm *trustMaterial) {
	c := p.c
	bi := buildinfo.Read()
	m := p.sys.Metrics()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "warden_build_info", Help: "Always 1: the running warden's version, commit and Go version (O14).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.CommitLabel(), "goversion": bi.GoVersion}})
	buildInfo.Set(1)
	m.Registry.MustRegister(buildInfo)
	m.RegisterStorage(p.store.Health(), persistence.Reserve{Dir: c.Data, Bytes: c.StorageReserve})
	var clusterAPI httpapi.ClusterNode
	if p.node != nil {
		clusterAPI = p.node
		registerClusterMetrics(m.Registry, p.node, p.store)
	}
	opts := httpapi.Options{CallbackToken: c.CallbackToken, OperatorToken: c.OperatorToken,
		Operators: tm.operators, CallbackModes: c.CallbackAuth, CallbackKeys: tm.signing, CallbackTokenTTL: c.CallbackTokenTTL,
		Webhooks: tm.webhooks, OIDC: tm.oidc, ProtectMetrics: c.ProtectMetrics,
		Cluster: clusterAPI, ClusterToken: c.ClusterToken, Logger: p.log, PublicURL: c.PublicURL, DevTokenHint: devTokenHint(c),
		Maintenance: maintenance{p}}
	server := httpapi.New(p.sys, opts)
	if c.BenchNoop {
		serveFloors(server, p.store)
	}
	api := http.Handler(server)
	p.live.Store(&api)
	p.log.Info("ready", "version", bi.Version, "commit", bi.CommitLabel(), "data", c.Data, "dispatch", c.Dispatch, "bootstrap", c.Bootstrap, "pools", config.Pools(c.Pools).String(),
		"callback_auth", strings.Join(c.CallbackAuth, ","), "operators", len(tm.operators)+min(1, len(c.OperatorToken)), "read_only", p.store.Health().ReadOnly() != nil)
}

// run serves until a signal, a drain, a failed store or a failed server,
// then stops within bounds.
func (p *process) run() error {
	monitorCtx, stopMonitor := context.WithCancel(context.Background())
	defer stopMonitor()
	go p.store.Monitor(monitorCtx)
	var drained <-chan struct{} // nil, never ready, on a single node
	nodeCtx, stopNode := context.WithCancel(context.Background())
	defer stopNode()
	if p.node != nil {
		drained = p.node.Drained()
		go p.node.Run(nodeCtx)
		p.log.Info("cluster node", "node", p.c.Node, "advertise", advertiseURL(p.c), "lease_ttl", p.c.LeaseTTL)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	var failed *persistence.Failure
	select {
	case s := <-sig:
		p.log.Info("shutting down", "signal", s.String())
	case <-drained:
		p.log.Info("drained: every shard handed over; stopping")
	case <-p.store.Health().Sealed():
		failed = p.store.Health().Failed()
	case err := <-p.served:
		return fmt.Errorf("http server: %w", err)
	}
	stopNode()
	return p.stop(failed)
}

// sealedDrain is how long a sealed process goes on answering before it
// stops: every caller in flight was answered when the store
// sealed, and what comes meanwhile (a retried callback, a load balancer's
// /readyz) reads the named cause, 503 storage_unavailable, rather than a
// refused connection. Nothing is stuck in the store to wait for: a commit
// whose sync failed was refused, not held.
const sealedDrain = 2 * time.Second

// leaveBound is how long a node waits for etcd to take its lease back
// when it stops.
const leaveBound = 2 * time.Second

// storeCloseBound is how long a close may take before warden exits
// without it: a store that does not close in this time is wedged.
const storeCloseBound = 5 * time.Second

// stop refuses new work (503 + Retry-After), lets what is in hand finish
// within the grace, hands the shards back (a cluster node), closes the
// listener and the store. Each step has a bound: a wedged store never
// holds the process. After a storage failure it exits with
// exitStorage.
func (p *process) stop(failed *persistence.Failure) error {
	grace := p.c.ShutdownGrace
	if failed != nil {
		time.Sleep(sealedDrain)
		grace = min(grace, sealedDrain)
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if !within(ctx, func() { p.sys.Stop(ctx) }) {
		p.log.Warn("actors did not stop within the grace; exiting without them")
	}
	if p.node != nil {
		// Its own bound, not what the actors left of the grace: a lease
		// not revoked holds the cluster's offline commands for a TTL.
		leaveCtx, cancelLeave := context.WithTimeout(context.Background(), leaveBound)
		p.node.Leave(leaveCtx)
		cancelLeave()
	}
	_ = p.srv.Shutdown(ctx)
	var closeErr error
	closeCtx, cancelClose := context.WithTimeout(context.Background(), storeCloseBound)
	defer cancelClose()
	closed := within(closeCtx, func() { closeErr = p.store.Close() })
	switch {
	case failed != nil:
		p.stored = true
		p.log.Error("stopped after a storage failure; the store was not closed", "cause", string(failed.Cause), "exit_status", exitStorage)
		return statusError{exitStorage, fmt.Errorf("%w; exiting with status %d so that the service manager restarts warden once the disk is fixed", failed, exitStorage)}
	case !closed:
		p.stored = true
		p.log.Error("stopped; the store did not close within its bound", "bound", storeCloseBound.String(), "exit_status", exitStorage)
		return statusError{exitStorage, fmt.Errorf("the store did not close within %s", storeCloseBound)}
	case closeErr != nil:
		p.stored = true
		return statusError{exitStorage, fmt.Errorf("close store: %w", closeErr)}
	}
	p.stored = true
	p.log.Info("stopped", "store_closed", true)
	return nil
}

// devOperatorToken is make run's operator token, public in the Makefile
// and the README; only it is ever named on the sign-in page.
const devOperatorToken = "dev-operator-token"

// devTokenHint tells the sign-in page where make run's token is, when
// warden runs with it.
func devTokenHint(c config.Serve) string {
	if c.OperatorToken != devOperatorToken {
		return ""
	}
	return "This warden runs with make run's development token: sign in with " + devOperatorToken + " (WARDEN_OPERATOR_TOKEN in the Makefile)."
}

// registerClusterMetrics exports the failure detector's and the leases'
// counts, and how the store's commits went in etcd transactions: a
// detector that storms, or a node that keeps losing its lease, shows here
// and in the alerts.
func registerClusterMetrics(reg *prometheus.Registry, n *cluster.Node, st *persistence.Store) {
	count := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	counter := func(name, help string, f func(cluster.Stats) int64) prometheus.Collector {
		return count(name, help, func() int64 { return f(n.Stats()) })
	}
	reg.MustRegister(
		counter("warden_cluster_revocations_total", "Leases of silent members this node revoked (its failure detector, C5).",
			func(s cluster.Stats) int64 { return s.Revocations }),
		counter("warden_cluster_revocations_held_total", "Revocations the detector's bound held back (more than a few a minute is a storm).",
			func(s cluster.Stats) int64 { return s.RevocationsHeld }),
		counter("warden_cluster_leases_lost_total", "Times this node found its own lease expired or revoked.",
			func(s cluster.Stats) int64 { return s.LeasesLost }),
		counter("warden_cluster_lapses_recovered_total", "Lease renewals that came after the local deadline; the node's shards were recovered again (a node too slow to renew).",
			func(s cluster.Stats) int64 { return s.LapsesRecovered }),
		counter("warden_cluster_unconfirmed_total", "Answers refused because the shard had moved when they were confirmed (C4).",
			func(s cluster.Stats) int64 { return s.Unconfirmed }),
		count("warden_cluster_commit_transactions_total", "etcd transactions this node's entity commits went in (C15: several commits may share one).",
			func() int64 { t, _ := st.CommitGroups(); return t }),
		count("warden_cluster_commits_grouped_total", "Entity commits that shared an etcd transaction with another entity's (C15).",
			func() int64 { _, g := st.CommitGroups(); return g }),
	)
}

// release gives back what start took, whatever happened.
func (p *process) release() {
	if p.store != nil && !p.stored {
		ctx, cancel := context.WithTimeout(context.Background(), storeCloseBound)
		within(ctx, func() { _ = p.store.Close() })
		cancel()
	}
	if p.cp != nil {
		p.cp.close()
	}
	if p.srv != nil {
		_ = p.srv.Close()
	}
	if p.stopCPU != nil {
		p.stopCPU()
	}
	if p.stopGC != nil {
		p.stopGC()
	}
	if p.lock != nil {
		_ = p.lock.Close()
	}
}

// within runs f and reports whether it returned before ctx ended; if not,
// f goes on alone (the process is about to exit).
func within(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

func callbackKeys(c config.Serve, tm *trustMaterial) *trust.Keyring {
	if slices.Contains(c.CallbackAuth, httpapi.ModeScoped) {
		return tm.signing
	}
	return nil
}

// dispatcher, bootstrapper and the environments' drivers hold their
// processes and connections within drv.
func dispatcher(c config.Serve, drv *driver.Descriptors) driver.Dispatcher {
	if c.Dispatch == "exec" {
		// The run's scoped credential travels in the request on stdin;
		// the script's environment is the minimal one.
		return &driver.ExecDispatcher{Exec: driver.Exec{Command: c.DispatchCommand, Timeout: c.DispatchTimeout, PassEnv: c.DriverEnv, Descriptors: drv}}
	}
	return &driver.GitHub{APIURL: c.GitHubAPIURL, Repo: c.GitHubRepo, Workflow: c.GitHubWorkflow, Ref: c.GitHubRef,
		Token: c.GitHubToken, Client: &http.Client{Timeout: c.DispatchTimeout, Transport: drv.Transport()}}
}

func bootstrapper(c config.Serve, drv *driver.Descriptors) driver.Bootstrapper {
	if c.Bootstrap == "exec" {
		return &driver.ExecBootstrapper{Exec: driver.Exec{Command: c.BootstrapCommand, Timeout: c.BootstrapTimeout, PassEnv: c.DriverEnv, Descriptors: drv}}
	}
	return &driver.HTTPSProbe{Timeout: 10 * time.Second, Dial: drv.DialContext}
}

// notifier is where environment notifications go: GitHub's
// commit statuses and pull-request comments, a webhook, or nowhere (they
// stay in the outbox).
func notifier(c config.Serve, drv *driver.Descriptors) driver.Notifier {
	client := &http.Client{Timeout: 10 * time.Second, Transport: drv.Transport()}
	switch c.Notify {
	case "github":
		return &driver.GitHubStatus{APIURL: c.GitHubAPIURL, Repo: c.GitHubRepo, Token: c.GitHubToken, Client: client}
	case "webhook":
		return &driver.Webhook{Endpoint: c.NotifyURL, Client: client}
	}
	return nil
}

// envConfig wires preview environments: one exec driver serves every
// capability (the request names it), if configured. Their processes
// count against drv with every other driver's (the local platform's
// against c.Platform.Descriptors, the same share).
func envConfig(c config.Serve, drv *driver.Descriptors) (actors.EnvConfig, error) {
	mc := environment.DefaultConfig()
	mc.LeaseFor, mc.RetryBackoff, mc.PreviewURL = c.EnvLease, c.EnvRetryBackoff, c.PreviewURL
	mc.RemoveArtifacts = c.EnvPlatform == "local" // its images are each environment's own
	mc.Sleeps = c.EnvPlatform == "local" && c.Platform.Sleeps()
	// A branch's shard moves about a lease TTL after its node dies: ask
	// again once it can have (a lost ask held a create's caller a minute).
	mc.AskBranchAgain = max(mc.AskBranchAgain, 3*c.LeaseTTL)
	// A lease owner names this process: after a restart the new process is
	// another worker, which takes over only after the lease expires.
	host, _ := os.Hostname()
	ec := actors.EnvConfig{Machine: environment.Machine{Config: mc}, Worker: fmt.Sprintf("warden@%s/%d", host, os.Getpid()),
		Notifier: notifier(c, drv), ReconcileEvery: c.EnvReconcileEvery, SleepAfter: c.PreviewSleepAfter,
		// One process holds the Pebble lock, or, on a cluster, this node
		// owns the environment's shard and the previous owner is fenced: a
		// lease owner other than this process found when an environment
		// loads can no longer commit.
		ExclusiveStore: true}
	if len(c.EnvDriverCommand) > 0 {
		d := &driver.ExecCapability{Exec: driver.Exec{Command: c.EnvDriverCommand, Timeout: c.EnvDriverTimeout, PassEnv: c.DriverEnv, Descriptors: drv}}
		ec.Drivers = actors.DriverForAll(d)
	}
	return ec, localPlatform(c, &ec)
}

// localPlatform puts the local platform's drivers in ec.
func localPlatform(c config.Serve, ec *actors.EnvConfig) error {
	if c.EnvPlatform != "local" {
		return nil
	}
	drivers, err := c.Platform.Drivers()
	if err != nil {
		return err
	}
	ec.Drivers, ec.Watcher = drivers, c.Platform.Watcher()
	ec.Seeds, _ = drivers[environment.Database].(driver.Seeder)
	return nil
}
