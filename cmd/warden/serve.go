package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/cluster"
	"github.com/wardenhq/warden/actors/driver"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/trust"
	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/persistence"
)

func serve(args []string, getenv func(string) string, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, errFlagHelp) {
			return nil
		}
		return err
	}
	var handler slog.Handler = slog.NewTextHandler(stderr, nil)
	if c.LogFormat == "json" {
		handler = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(handler)

	// Keys and modes are checked before anything listens: a refusal (T11)
	// is a clean exit with the command that fixes it.
	if err := prepareDataDir(c.Data); err != nil {
		return err
	}
	lock, err := lockDataDir(c.Data)
	if err != nil {
		return err
	}
	defer lock.Close()
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	tm, err := loadTrust(c, log)
	if err != nil {
		return err
	}

	// Listen first: /healthz answers at once and everything else is 503
	// with Retry-After until recovery has finished (/readyz).
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var live atomic.Pointer[http.Handler]
	srv := httpapi.NewHTTPServer(c.Listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := live.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		if r.URL.Path == "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{\"status\":\"ok\"}\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "{\"error\":{\"code\":\"unavailable\",\"message\":\"recovering\"}}\n")
	}))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	var store *persistence.Store
	var cp *clusterParts
	var node *cluster.Node
	var sys *actors.System
	if c.Node != "" {
		if cp, err = openCluster(c, trust.NewSealer(tm.seal), log); err != nil {
			_ = srv.Close()
			return err
		}
		defer cp.close()
		store = cp.store
		node = cluster.NewNode(c.Node, advertiseURL(c), c.LeaseTTL, cluster.Etcd{C: cp.client}, time.Now, cluster.Hooks{
			// The node ticks only once sys is running (node.Run below).
			Acquired: func(shard int, _ int64) { sys.AcquireShard(shard) },
			Released: func(shard int) { sys.ReleaseShard(shard) },
		}, log)
		node.SetPeers(c.ClusterToken)
	} else if store, err = persistence.Open(c.Data, persistence.Options{Sealer: trust.NewSealer(tm.seal)}); err != nil {
		_ = srv.Close()
		return err
	}
	defer store.Close()
	var clusterCfg actors.Cluster
	var clusterAPI httpapi.ClusterNode
	if node != nil {
		clusterCfg, clusterAPI = node, node
	}
	sys, err = actors.Start(actors.Config{
		Store:        store,
		Clock:        clock.Real{},
		Machine:      marquee.Machine{Config: c.Rules},
		Pools:        c.Pools,
		Dispatcher:   dispatcher(c),
		Bootstrapper: bootstrapper(c),
		ControlPlane: &driver.HTTPControlPlane{URL: c.ControlPlaneURL, Token: c.ControlPlaneToken, Client: &http.Client{Timeout: 10 * time.Second}},
		CallbackURL:  strings.TrimRight(c.PublicURL, "/") + "/v1/webhooks/terraform",
		// Scoped credentials are minted only when the mode is on (T1).
		CallbackKeys:     callbackKeys(c, tm),
		CallbackTokenTTL: c.CallbackTokenTTL,
		Logger:           log,
		RestartLimit:     c.RestartLimit,
		RestartWindow:    c.RestartWindow,
		IdleAfter:        c.IdleAfter,
		Secrets:          []string{c.CallbackToken, c.OperatorToken, c.GitHubToken, c.ControlPlaneToken},
		Env:              envConfig(c),
		Cluster:          clusterCfg,
	})
	if err != nil {
		_ = srv.Close()
		return err
	}
	bi := buildinfo.Read()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Name: "warden_build_info", Help: "Always 1: the running warden's version, commit and Go version (O14).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.CommitLabel(), "goversion": bi.GoVersion}})
	buildInfo.Set(1)
	sys.Metrics().Registry.MustRegister(buildInfo)
	api := http.Handler(httpapi.New(sys, httpapi.Options{CallbackToken: c.CallbackToken, OperatorToken: c.OperatorToken,
		Operators: tm.operators, CallbackModes: c.CallbackAuth, CallbackKeys: tm.signing, CallbackTokenTTL: c.CallbackTokenTTL,
		Webhooks: tm.webhooks, OIDC: tm.oidc, ProtectMetrics: c.ProtectMetrics, NoopWebhook: c.benchNoop,
		Cluster: clusterAPI, ClusterToken: c.ClusterToken, Logger: log}))
	live.Store(&api)
	log.Info("ready", "version", bi.Version, "commit", bi.CommitLabel(), "data", c.Data, "dispatch", c.Dispatch, "bootstrap", c.Bootstrap, "pools", poolFlag(c.Pools).String(),
		"callback_auth", strings.Join(c.CallbackAuth, ","), "operators", len(tm.operators)+min(1, len(c.OperatorToken)))

	pruneStop := make(chan struct{})
	go pruneDedup(store, clock.Real{}, c.DedupRetention, log, pruneStop)

	var drained <-chan struct{} // nil, never ready, on a single node
	nodeCtx, stopNode := context.WithCancel(context.Background())
	defer stopNode()
	if node != nil {
		drained = node.Drained()
		go node.Run(nodeCtx)
		log.Info("cluster node", "node", c.Node, "advertise", advertiseURL(c), "lease_ttl", c.LeaseTTL)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case <-drained:
		log.Info("drained: every shard handed over; stopping")
	case err := <-served:
		close(pruneStop)
		return fmt.Errorf("http server: %w", err)
	}
	close(pruneStop)
	// Stop accepting new work (503 + Retry-After), let what is in hand
	// finish, hand the shards back (a cluster node), then close the
	// listener and flush the store.
	ctx, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
	defer cancel()
	sys.Stop(ctx)
	if node != nil {
		stopNode()
		node.Leave(ctx)
	}
	_ = srv.Shutdown(ctx)
	if err := store.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info("stopped")
	return nil
}

var errFlagHelp = errors.New("flag: help requested")

func callbackKeys(c config, tm *trustMaterial) *trust.Keyring {
	if slices.Contains(c.CallbackAuth, httpapi.ModeScoped) {
		return tm.signing
	}
	return nil
}

func dispatcher(c config) driver.Dispatcher {
	if c.Dispatch == "exec" {
		// The run's scoped credential travels in the request on stdin (T1);
		// the script's environment is the minimal one (T9).
		return &driver.ExecDispatcher{Exec: driver.Exec{Command: c.DispatchCommand, Timeout: c.DispatchTimeout, PassEnv: c.DriverEnv}}
	}
	return &driver.GitHub{APIURL: c.GitHubAPIURL, Repo: c.GitHubRepo, Workflow: c.GitHubWorkflow, Ref: c.GitHubRef,
		Token: c.GitHubToken, Client: &http.Client{Timeout: c.DispatchTimeout}}
}

func bootstrapper(c config) driver.Bootstrapper {
	if c.Bootstrap == "exec" {
		return &driver.ExecBootstrapper{Exec: driver.Exec{Command: c.BootstrapCommand, Timeout: c.BootstrapTimeout, PassEnv: c.DriverEnv}}
	}
	return &driver.HTTPSProbe{Timeout: 10 * time.Second}
}

// pruneDedup forgets deliveries older than the retention, hourly.
func pruneDedup(store *persistence.Store, clk clock.Clock, retention time.Duration, log *slog.Logger, stop <-chan struct{}) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			n, err := store.PruneDedup(clk.Now().Add(-retention))
			if err != nil {
				log.Warn("dedup prune failed", "err", err)
			} else if n > 0 {
				log.Info("dedup records pruned", "count", n)
			}
		}
	}
}

// notifier is where environment notifications go (E10, W7): GitHub's
// commit statuses and pull-request comments, a webhook, or nowhere (they
// stay in the outbox).
func notifier(c config) driver.Notifier {
	client := &http.Client{Timeout: 10 * time.Second}
	switch c.Notify {
	case "github":
		return &driver.GitHubStatus{APIURL: c.GitHubAPIURL, Repo: c.GitHubRepo, Token: c.GitHubToken, Client: client}
	case "webhook":
		return &driver.Webhook{Endpoint: c.NotifyURL, Client: client}
	}
	return nil
}

// envConfig wires preview environments: one exec driver serves every
// capability (the request names it), if configured.
func envConfig(c config) actors.EnvConfig {
	mc := environment.DefaultConfig()
	mc.LeaseFor, mc.RetryBackoff, mc.PreviewURL = c.EnvLease, c.EnvRetryBackoff, c.PreviewURL
	// A lease owner names this process: after a restart the new process is
	// another worker, which takes over only after the lease expires (E7).
	host, _ := os.Hostname()
	ec := actors.EnvConfig{Machine: environment.Machine{Config: mc}, Worker: fmt.Sprintf("warden@%s/%d", host, os.Getpid()),
		Notifier: notifier(c), ReconcileEvery: c.EnvReconcileEvery,
		// One process holds the Pebble lock, or, on a cluster, this node
		// owns the environment's shard and the previous owner is fenced: a
		// lease owner other than this process found when an environment
		// loads can no longer commit.
		ExclusiveStore: true}
	if len(c.EnvDriverCommand) > 0 {
		d := &driver.ExecCapability{Exec: driver.Exec{Command: c.EnvDriverCommand, Timeout: c.EnvDriverTimeout, PassEnv: c.DriverEnv}}
		ec.Drivers = actors.DriverForAll(d)
	}
	return ec
}
