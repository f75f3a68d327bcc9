package environment_test

import (
	"fmt"
	. "github.com/wardenhq/warden/actors/environment"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// world is a small, exact model of the outside: resources by declared
// identity with their owner, the migration ledger and the route target.
type world struct {
	res      map[string]string // identity -> owner
	ledger   map[string]bool   // database -> migrated
	route    map[string]uint64 // route name (branch) -> generation
	notified map[string]int    // notification key -> deliveries
}

func newWorld() *world {
	return &world{res: map[string]string{}, ledger: map[string]bool{}, route: map[string]uint64{}, notified: map[string]int{}}
}

// apply performs an effect as a real driver would: create-or-find under the
// declared identity, compare-and-set for the route, remove what is ours.
func (w *world) apply(e Env, d Do) {
	switch d.Op {
	case Apply:
		switch d.Capability {
		case Route:
			if w.route[e.Branch] <= d.ExpectedRoute || w.route[e.Branch] == d.Generation {
				w.route[e.Branch] = d.Generation
			}
		case Migrations:
			w.ledger[d.Identity] = true
		case Smoke:
		case Artifact:
			// Build outputs are shared and immutable: no environment owns
			// (or removes) one.
			w.res[d.Identity] = ""
		default:
			if _, ok := w.res[d.Identity]; !ok {
				w.res[d.Identity] = e.ID
			}
		}
	case Remove:
		switch d.Capability {
		case Route:
			if w.route[e.Branch] == d.Generation {
				delete(w.route, e.Branch)
			}
		case Migrations:
			delete(w.ledger, d.Identity)
		default:
			if w.res[d.Identity] == e.ID {
				delete(w.res, d.Identity)
			}
		}
	}
}

// observe answers from the world's truth.
func (w *world) observe(e Env, d Do) Observation {
	switch d.Capability {
	case Route:
		g, ok := w.route[e.Branch]
		return Observation{Exists: ok, RouteTarget: g, Owner: e.ID, Matches: ok}
	case Migrations:
		return Observation{Exists: w.ledger[d.Identity], Owner: e.ID, Matches: w.ledger[d.Identity]}
	case Smoke:
		_, app := w.res["app-"+e.ID]
		return Observation{Exists: app && w.route[e.Branch] == e.Generation, Owner: e.ID, Matches: true, RouteTarget: w.route[e.Branch]}
	}
	owner, ok := w.res[d.Identity]
	return Observation{Exists: ok, Owner: owner, Matches: ok}
}

// fault is one I11 boundary, injected once.
type fault string

const (
	noFault             fault = ""
	crashAfterIntent    fault = "crash after intent"
	successThenTimeout  fault = "external success followed by timeout"
	overlappingLeases   fault = "two workers with overlapping leases"
	staleAfterTakeover  fault = "stale worker completing after takeover"
	routeResponseLost   fault = "route updated but response lost"
	migrationDisconnect fault = "migration committed but client disconnected"
	notifyUnavailable   fault = "notification unavailable after readiness"
	removalPartial      fault = "removal partially complete"
	wrongOwnership      fault = "resource present with wrong ownership"
)

// drive runs the controller until no transition is eligible: a worker
// advances, performs each effect against the world, reports, and the clock
// moves past back-offs and leases. The fault fires once, at its boundary.
func drive(t *testing.T, f fault, removeAfter bool) (Env, *world, bool) {
	m := Machine{Config: DefaultConfig()}
	now := epoch
	e, err := m.New(Create{ID: "env-271", Branch: "feature-search", Revision: "3f2c9e1", Generation: 1}, now)
	require.NoError(t, err)
	w := newWorld()
	fired := false
	if f == wrongOwnership {
		w.res["db-env-271"] = "env-999" // a same-name database of someone else
	}
	step := func(ev Event) Outcome {
		next, out := m.Step(e, ev, now)
		require.NoError(t, out.Err)
		e = next
		return out
	}
	var stale *DriverAnswer
	for i := 0; i < 400; i++ {
		out := step(Advance{Owner: "worker-a"})
		if len(out.Effects) == 0 {
			switch {
			case e.LastFailure != nil && !e.LastFailure.Retryable && f == wrongOwnership:
				// The operator removes the foreign database and resumes.
				delete(w.res, "db-env-271")
				fired = true
				step(Action{Name: "resume", Actor: "ana", Reason: "foreign database moved away"})
				continue
			case e.State == Ready:
				// Deliver pending notifications (E10).
				for _, n := range e.Outbox {
					if !n.Delivered {
						ok := !(f == notifyUnavailable && !fired)
						fired = fired || f == notifyUnavailable
						if ok {
							w.notified[n.Key]++
						}
						step(Delivered{Key: n.Key, OK: ok})
					}
				}
				if slices.ContainsFunc(e.Outbox, func(n Notification) bool { return !n.Delivered }) {
					continue
				}
				if !removeAfter {
					return e, w, fired
				}
				step(RemoveEnv{Reason: "branch merged"})
				continue
			case e.Tombstone != nil:
				return e, w, fired
			}
			now = now.Add(30 * time.Minute) // past back-offs and leases
			continue
		}
		for len(out.Effects) > 0 {
			d, ok := out.Effects[0].(Do)
			if !ok {
				break
			}
			if f == overlappingLeases && !fired {
				fired = true
				o2 := step(Advance{Owner: "worker-b"})
				require.Empty(t, o2.Effects, "a second worker cannot take a leased transition (E7)")
			}
			if f == crashAfterIntent && !fired && d.Op != Observe {
				fired = true // the worker dies before the effect: nothing happens
				now = now.Add(m.Config.LeaseFor + time.Second)
				out = step(Advance{Owner: "worker-b"})
				continue
			}
			if f == staleAfterTakeover && !fired && d.Op == Apply {
				fired = true
				w.apply(e, d) // worker-a did the work, then paused past its lease
				stale = &DriverAnswer{AttemptID: d.AttemptID, LeaseGeneration: d.LeaseGeneration, OK: true}
				now = now.Add(m.Config.LeaseFor + time.Second)
				out = step(Advance{Owner: "worker-b"})
				rej := step(*stale) // worker-a wakes and reports
				require.True(t, rej.Answer.Rejected, "I13: a stale lease generation never commits")
				continue
			}
			var r DriverAnswer
			if d.Op == Observe {
				o := w.observe(e, d)
				if e.State == DataRemoved || (e.Attempt != nil && e.Attempt.From == DataRemoved) {
					o = w.observe(e, d) // verified-absent reads the same truth
				}
				r = DriverAnswer{AttemptID: d.AttemptID, LeaseGeneration: d.LeaseGeneration, OK: true, Observation: &o}
			} else {
				w.apply(e, d)
				r = DriverAnswer{AttemptID: d.AttemptID, LeaseGeneration: d.LeaseGeneration, OK: true}
				lose := (f == successThenTimeout && d.Capability == Database) ||
					(f == routeResponseLost && d.Capability == Route) ||
					(f == migrationDisconnect && d.Capability == Migrations) ||
					(f == removalPartial && d.Op == Remove && d.Capability == App)
				if lose && !fired {
					fired = true
					r = DriverAnswer{AttemptID: d.AttemptID, LeaseGeneration: d.LeaseGeneration, Timeout: true}
				}
			}
			out = step(r)
		}
	}
	t.Fatalf("%s: did not come to rest; state %s", f, e.State)
	return e, w, fired
}

func resources(w *world) string {
	return fmt.Sprint(slices.Sorted(maps.Keys(w.res)), w.ledger, w.route, w.notified)
}

// TestI11SingleFaultsConverge: for each boundary of I11, a fault injected
// once, then the controller runs until no transition is eligible: the final
// state and the set of external resources equal one uninterrupted run's,
// for provisioning and for removal.
func TestI11SingleFaultsConverge(t *testing.T) {
	for _, removeAfter := range []bool{false, true} {
		clean, cw, _ := drive(t, noFault, removeAfter)
		for _, f := range []fault{crashAfterIntent, successThenTimeout, overlappingLeases, staleAfterTakeover,
			routeResponseLost, migrationDisconnect, notifyUnavailable, removalPartial, wrongOwnership} {
			if f == removalPartial && !removeAfter {
				continue // a removal fault needs a removal
			}
			t.Run(fmt.Sprintf("%s/remove=%t", f, removeAfter), func(t *testing.T) {
				e, w, fired := drive(t, f, removeAfter)
				require.True(t, fired, "the fault was injected")
				require.Equal(t, clean.State, e.State, "I11: same final state")
				require.Equal(t, resources(cw), resources(w), "I11: same external resources")
				require.Equal(t, clean.Tombstone != nil, e.Tombstone != nil)
				// I12: no two live resources for one identity (the world is
				// keyed by identity), none left after the tombstone.
				if e.Tombstone != nil {
					for id, owner := range w.res {
						require.NotEqual(t, e.ID, owner, "I12: %s outlives the tombstone", id)
					}
				}
			})
		}
	}
}
