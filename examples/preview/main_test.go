package main

import (
	"os"
	"testing"
)

// TestFenceRefusesAnObsoleteLease: E7. Once a call under lease generation 5
// has acted for an environment, an effect under generation 4 (a worker that
// paused past its lease, or a driver that outlived a killed warden) is
// refused as a conflict and changes nothing; observations are not fenced.
func TestFenceRefusesAnObsoleteLease(t *testing.T) {
	d := drivers{root: t.TempDir()}
	req := request{Capability: "database", Op: "apply", EnvID: "env-1", Identity: "db-env-1", LeaseGeneration: 5, Branch: "main", Revision: "r1"}
	if res, err := d.fenced(req); err != nil || !res.OK {
		t.Fatalf("generation 5 applies: %+v %v", res, err)
	}
	stale := req
	stale.Identity, stale.LeaseGeneration = "db-env-1", 4
	stale.Op = "remove"
	res, err := d.fenced(stale)
	if err != nil || res.OK || res.Category != "conflict" {
		t.Fatalf("generation 4 must be refused: %+v %v", res, err)
	}
	obs, err := d.fenced(request{Capability: "database", Op: "observe", EnvID: "env-1", Identity: "db-env-1", LeaseGeneration: 1, Branch: "main"})
	if err != nil || obs.Observation == nil || !obs.Observation.Exists || obs.Observation.Owner != "env-1" {
		t.Fatalf("the stale removal changed nothing and observing is not fenced: %+v %v", obs, err)
	}
	req.LeaseGeneration = 6
	req.Op = "remove"
	if res, err := d.fenced(req); err != nil || !res.OK {
		t.Fatalf("a newer generation acts: %+v %v", res, err)
	}
}

// TestNamesMustBePlain: the driver builds file names from the request's
// identities, so anything but a plain name is a configuration failure.
func TestNamesMustBePlain(t *testing.T) {
	d := drivers{root: t.TempDir()}
	for _, bad := range []request{
		{Capability: "artifact", Op: "apply", EnvID: "env-1", Identity: "../../etc", Branch: "main"},
		{Capability: "route", Op: "apply", EnvID: "env-1", Identity: "route-x-1", Branch: "a/b"},
		{Capability: "app", Op: "observe", EnvID: ".hidden", Identity: "app-x", Branch: "main"},
	} {
		res, err := d.fenced(bad)
		if err != nil || res.Category != "configuration" {
			t.Errorf("%+v: want a configuration failure, got %+v %v", bad, res, err)
		}
	}
}

// TestP14RouteObservationSaysWhatTheRouteHolds: a route changed by hand
// under the same generation, to another port or another environment, is
// observed as it is: its upstream as the provider id, which the controller
// compares with the one it recorded, and the environment it names. A
// dead application behind an unchanged route leaves the route as written:
// that is the application's drift (P14), not the route's.
func TestP14RouteObservationSaysWhatTheRouteHolds(t *testing.T) {
	d := drivers{root: t.TempDir()}
	if err := writeJSON(d.path("apps", "app-env-1.json"), appFile{PID: os.Getpid(), Port: 4100, Owner: "env-1"}); err != nil {
		t.Fatal(err)
	}
	observe := func(rt routeFile) *observation {
		t.Helper()
		if err := writeJSON(d.path("routes", "main.json"), rt); err != nil {
			t.Fatal(err)
		}
		res, err := d.fenced(request{Capability: "route", Op: "observe", EnvID: "env-1", Identity: "route-main-3", Generation: 3, Branch: "main"})
		if err != nil || res.Observation == nil {
			t.Fatalf("observe: %+v %v", res, err)
		}
		return res.Observation
	}
	if o := observe(routeFile{Generation: 3, Env: "env-1", Port: 4100}); !o.Exists || !o.Matches || o.Owner != "env-1" || o.RouteTarget != 3 || o.ProviderID != "127.0.0.1:4100" {
		t.Fatalf("the route as activated: %+v", o)
	}
	if o := observe(routeFile{Generation: 3, Env: "env-1", Port: 4999}); o.ProviderID != "127.0.0.1:4999" {
		t.Fatalf("another port is another upstream: %+v", o)
	}
	if o := observe(routeFile{Generation: 3, Env: "env-9", Port: 4100}); o.Owner != "env-9" {
		t.Fatalf("another environment is named as the owner: %+v", o)
	}
	if err := os.Remove(d.path("apps", "app-env-1.json")); err != nil {
		t.Fatal(err)
	}
	if o := observe(routeFile{Generation: 3, Env: "env-1", Port: 4100}); !o.Matches || o.ProviderID != "127.0.0.1:4100" {
		t.Fatalf("a dead application leaves the route as written: %+v", o)
	}
}
