package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/driver"
)

// fakePreview is an in-process preview world standing behind the driver
// contract: resources by declared identity with their owner, migration
// ledgers, and routes by branch with a compare-and-set.
type fakePreview struct {
	mu     sync.Mutex
	res    map[string]string
	ledger map[string]bool
	route  map[string]uint64
	// observed counts observations per capability: a test waits for the
	// reconciler to have looked again instead of sleeping.
	observed map[environment.Capability]int
	// gate, when set for a capability, holds its applies until closed: a
	// test sees the attempt in flight, under its worker's lease.
	gate map[environment.Capability]chan struct{}
	// atWaker: branches whose route sends to the waker; stopped:
	// applications stopped; visited: the last visit under each branch's
	// host, as the proxy reports it (E19).
	atWaker map[string]bool
	stopped map[string]bool
	visited map[string]time.Time
}

// visit is a visit under the branch's host at t, as the proxy logs it.
func (p *fakePreview) visit(branch string, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.visited[branch] = t
}

// asleep reports whether the branch's route is at the waker and the
// application stopped.
func (p *fakePreview) asleep(branch, app string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.atWaker[branch] && p.stopped[app]
}

// observations is how often a capability was observed so far.
// hold makes c's applies wait until the returned release is called: an
// attempt held in flight.
func (p *fakePreview) hold(c environment.Capability) (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate[c] = gate
	p.mu.Unlock()
	return func() { close(gate) }
}

func (p *fakePreview) observations(c environment.Capability) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.observed[c]
}

// waitObserved waits until c has been observed n more times than before.
func (p *fakePreview) waitObserved(t *testing.T, c environment.Capability, before, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return p.observations(c) >= before+n }, 10*time.Second, 2*time.Millisecond,
		"%s observed %d more times", c, n)
}

func newFakePreview() *fakePreview {
	return &fakePreview{res: map[string]string{}, ledger: map[string]bool{}, route: map[string]uint64{}, observed: map[environment.Capability]int{},
		gate: map[environment.Capability]chan struct{}{}, atWaker: map[string]bool{}, stopped: map[string]bool{}, visited: map[string]time.Time{}}
}

type capDriver struct {
	p   *fakePreview
	cap environment.Capability
}

func (p *fakePreview) drivers() map[environment.Capability]driver.Capability {
	out := map[environment.Capability]driver.Capability{}
	for _, c := range environment.StepCapabilities {
		out[c] = capDriver{p: p, cap: c}
	}
	return out
}

func (d capDriver) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	p := d.p
	p.mu.Lock()
	gate := p.gate[d.cap]
	p.mu.Unlock()
	if gate != nil && r.Op == "apply" {
		select {
		case <-gate:
		case <-ctx.Done():
			return driver.CapabilityResult{}, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.Op {
	case "sleep":
		switch d.cap {
		case environment.Route:
			if p.route[r.Branch] == 0 || p.route[r.Branch] == r.Generation {
				p.route[r.Branch], p.atWaker[r.Branch] = r.Generation, true
			}
		case environment.App:
			if p.res[r.Identity] == r.EnvID {
				p.stopped[r.Identity] = true
			}
		}
		return driver.CapabilityResult{OK: true}, nil
	case "apply":
		switch d.cap {
		case environment.Route:
			if p.route[r.Branch] <= r.ExpectedRoute || p.route[r.Branch] == r.Generation {
				p.route[r.Branch], p.atWaker[r.Branch] = r.Generation, false
			}
		case environment.App:
			if _, ok := p.res[r.Identity]; !ok {
				p.res[r.Identity] = r.EnvID
			}
			if p.res[r.Identity] == r.EnvID {
				p.stopped[r.Identity] = false
			}
		case environment.Migrations:
			p.ledger[r.Identity] = true
		case environment.Smoke:
		default:
			if _, ok := p.res[r.Identity]; !ok {
				p.res[r.Identity] = r.EnvID
			}
		}
		return driver.CapabilityResult{OK: true}, nil
	case "remove":
		switch d.cap {
		case environment.Route:
			if p.route[r.Branch] == r.Generation {
				delete(p.route, r.Branch)
			}
		case environment.Migrations:
			delete(p.ledger, r.Identity)
		default:
			if p.res[r.Identity] == r.EnvID {
				delete(p.res, r.Identity)
			}
		}
		return driver.CapabilityResult{OK: true}, nil
	}
	p.observed[d.cap]++
	o := &driver.CapabilityObservation{Owner: r.EnvID}
	switch d.cap {
	case environment.Route:
		o.RouteTarget = p.route[r.Branch]
		o.Exists, o.Matches = o.RouteTarget != 0, o.RouteTarget != 0
		o.AtWaker, o.LastRequest = p.atWaker[r.Branch], p.visited[r.Branch]
	case environment.Migrations:
		o.Exists, o.Matches = p.ledger[r.Identity], p.ledger[r.Identity]
	case environment.Smoke:
		_, app := p.res["app-"+r.EnvID]
		app = app && !p.stopped["app-"+r.EnvID] && !p.atWaker[r.Branch]
		o.Exists, o.Matches, o.RouteTarget = app && p.route[r.Branch] == r.Generation, true, p.route[r.Branch]
	default:
		owner, ok := p.res[r.Identity]
		o.Exists, o.Owner, o.Matches = ok, owner, ok
		if d.cap == environment.App && p.stopped[r.Identity] {
			o.Matches, o.Stopped = false, true
		}
	}
	return driver.CapabilityResult{OK: true, Observation: o}, nil
}

func (p *fakePreview) resources() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.res) + len(p.route)
}

// notifySink records notification deliveries with their identity.
type notifySink struct {
	mu       sync.Mutex
	keys     []string
	failNext int // answer 503 to this many deliveries first
	attempts []string
	srv      *httptest.Server
}

func newNotifySink(t *testing.T) *notifySink {
	n := &notifySink{}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		n.mu.Lock()
		defer n.mu.Unlock()
		n.attempts = append(n.attempts, r.Header.Get("Idempotency-Key"))
		if n.failNext > 0 {
			n.failNext--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Idempotency-Key") != body["key"] {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		n.keys = append(n.keys, body["key"])
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *notifySink) delivered() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.keys...)
}
