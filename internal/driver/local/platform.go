package local

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/driver"
)

// Platform is the local platform's parts (P1): one PostgreSQL server, podman
// and one Caddy, each named by flags of `warden serve --env-platform local`.
type Platform struct {
	// PostgresAdmin connects as a role that may create roles and
	// databases; Migrations is the application's migrations directory.
	PostgresAdmin, Migrations string
	// Podman and its options (Global before the command, Run for every
	// application container); AppContext the application's build context.
	Podman             string
	PodmanGlobal       []string
	PodmanRun          []string
	AppContext         string
	CaddyAdmin         string
	CaddyServer        string
	PreviewListen      string
	PreviewDomain      string
	UpstreamLookupTime time.Duration
	// Instance labels this platform's application containers;
	// Console is warden's console, linked from the catch-all page.
	Instance, Console string
	// Waker is where Caddy reaches warden's waker (host:port; empty:
	// previews do not sleep); Traffic reads the access log Caddy writes
	// for the preview server, which tells when each preview was last
	// visited (E19, P21). One reader per process: it keeps where it
	// stopped.
	Waker   string
	Traffic *AccessLog
	// Descriptors bounds podman's commands, and the connections to Caddy,
	// the applications and PostgreSQL, with every other driver's
	// processes and connections.
	Descriptors *driver.Descriptors
}

// Prepare readies what is the platform's and no preview's: Caddy's
// catch-all page for hosts with no preview.
func (p Platform) Prepare(ctx context.Context) error {
	r := &Routes{Admin: p.CaddyAdmin, Server: p.CaddyServer, Console: p.Console, Client: newAdminClient(p.Descriptors), Traffic: p.Traffic}
	if err := r.EnsureFallback(ctx); err != nil {
		return err
	}
	return r.EnsureAccessLog(ctx)
}

// Sleeps reports whether previews may sleep here: a waker is configured,
// and an access log to know their visits by.
func (p Platform) Sleeps() bool { return p.Waker != "" && p.Traffic != nil }

// Watcher follows podman's events for this platform's applications.
func (p Platform) Watcher() driver.Watcher {
	return &Podman{Binary: p.Podman, Global: p.PodmanGlobal, Instance: p.Instance}
}

// Drivers are the platform's drivers by capability. The database's also
// makes, lists and removes the seeds previews' data is copied from (a
// driver.Seeder, P20).
func (p Platform) Drivers() (map[environment.Capability]driver.Capability, error) {
	migrations, err := LoadMigrations(p.Migrations)
	if err != nil {
		return nil, fmt.Errorf("local platform: %w", err)
	}
	data := &Data{Admin: p.PostgresAdmin, Migrations: migrations, Descriptors: p.Descriptors}
	// The health and smoke checks keep their connections alive; the
	// share closes the idle ones when a driver waits for descriptors.
	checks := &http.Client{Transport: p.Descriptors.Transport()}
	pod := &Podman{Binary: p.Podman, Global: p.PodmanGlobal, Context: p.AppContext, Run: p.PodmanRun, DatabaseURL: data.URL, Instance: p.Instance,
		Descriptors: p.Descriptors, Client: checks}
	lookup := p.UpstreamLookupTime
	if lookup == 0 {
		lookup = 10 * time.Second
	}
	routes := &Routes{Admin: p.CaddyAdmin, Server: p.CaddyServer, Public: p.PreviewListen, Domain: p.PreviewDomain, Console: p.Console,
		Client: newAdminClient(p.Descriptors), Checks: checks, Traffic: p.Traffic,
		Upstream: func(env string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), lookup)
			defer cancel()
			return pod.Upstream(ctx, env)
		}}
	if p.Sleeps() {
		routes.Waker = p.Waker
	}
	return map[environment.Capability]driver.Capability{
		environment.Artifact: pod, environment.App: pod,
		environment.Database: data, environment.Migrations: data,
		environment.Route: routes, environment.Smoke: routes,
	}, nil
}
