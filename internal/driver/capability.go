package driver

import (
	"context"
	"errors"
	"time"
)

// CapabilityRequest is one call of a preview-environment driver: the
// capability (artifact, database, migrations, app, route, smoke, notify),
// the operation (apply, observe, remove, sleep) and every identity it needs, so a
// driver never has to invent a name. The attempt id and lease generation
// let a driver refuse an obsolete caller where its target allows;
// ExpectedRoute is the compare-and-set guard of a route activation: the
// route may move to Generation only while its current generation is at most
// ExpectedRoute (never backwards).
type CapabilityRequest struct {
	Capability      string `json:"capability"`
	Op              string `json:"op"`
	EnvID           string `json:"env_id"`
	Identity        string `json:"identity"`
	AttemptID       string `json:"attempt_id"`
	LeaseGeneration uint64 `json:"lease_generation"`
	Generation      uint64 `json:"generation"`
	ExpectedRoute   uint64 `json:"expected_route,omitempty"`
	Branch          string `json:"branch"`
	Revision        string `json:"revision"`
	// DataFrom names the seed a preview's database is copied from ("":
	// made empty); the database capability's apply reads it.
	DataFrom string `json:"data_from,omitempty"`
	// Epoch is the calling node's shard epoch in a cluster, carried with
	// the lease generation; 0 on a single node.
	Epoch int64 `json:"epoch,omitempty"`
}

// CapabilityResult is the driver's machine-readable answer. For observe it
// carries what exists; apply and remove may report an observation too, but
// the controller verifies by its own observe, never by OK alone.
type CapabilityResult struct {
	OK          bool                   `json:"ok"`
	Category    string                 `json:"category,omitempty"` // on failure: transient, configuration, permission, conflict, unknown
	Message     string                 `json:"message,omitempty"`
	Observation *CapabilityObservation `json:"observation,omitempty"`
}

// CapabilityObservation is what an observe found under the identity.
type CapabilityObservation struct {
	Exists      bool   `json:"exists"`
	Owner       string `json:"owner,omitempty"`
	Matches     bool   `json:"matches"`
	ProviderID  string `json:"provider_id,omitempty"`
	RouteTarget uint64 `json:"route_target,omitempty"`
	// URL is where a route serves the preview, if the driver knows.
	URL string `json:"url,omitempty"`
	// Replace: the resource exists but can never become ready as it is
	// (it exited, or runs a configuration that is no longer current): it
	// is to be applied again, not waited for.
	Replace bool `json:"replace,omitempty"`
	// AtWaker: the route sends its host to warden's waker (a sleeping
	// preview's). Stopped: the application exists, stopped, as a sleep
	// leaves it.
	AtWaker bool `json:"at_waker,omitempty"`
	Stopped bool `json:"stopped,omitempty"`
	// LastRequest is the last request the proxy served under the route's
	// host name that was someone's visit (not a HEAD, not a health check),
	// as far as its log reaches; zero: none seen.
	LastRequest time.Time `json:"last_request,omitzero"`
	Detail      string    `json:"detail,omitempty"`
}

// The waker's side of a sleeping preview's route (E19, E20): the route
// sends every request under the preview's host to warden's listener at
// WakerPath, setting, over any the client sent, HeaderWake to the
// environment to wake and HeaderWakePath to the path that was asked for
// (a health check's wakes nothing).
const (
	HeaderWake     = "X-Warden-Wake"
	HeaderWakePath = "X-Warden-Wake-Path"
	WakerPath      = "/v1/waker"
)

// Seed is a template a preview's data is copied from (P20), as the
// platform holds it: its name, a fingerprint of what it was made from,
// and the previews whose databases were copied from it and are still
// there.
type Seed struct {
	Name        string   `json:"name"`
	Fingerprint string   `json:"fingerprint"`
	Previews    []string `json:"previews"`
}

// Seeder makes, lists and removes a platform's seeds. A seed is the
// platform's own object, and its marks there are its record: making one
// again from the same is nothing, one a crash left half made is made
// again, and warden keeps no record of its own.
type Seeder interface {
	MakeSeed(ctx context.Context, name, sql string) (Seed, error)
	RemoveSeed(ctx context.Context, name string) error
	Seeds(ctx context.Context) ([]Seed, error)
}

// Capability performs one operation of one capability. Implementations are
// in-process (tests, the simulator) or ExecCapability (scripts).
type Capability interface {
	Do(ctx context.Context, r CapabilityRequest) (CapabilityResult, error)
}

// Watcher reports, as soon as a platform says so, that something of an
// environment changed under it (its application's container exited):
// the controller observes that environment then, instead of at its next
// round. Watch runs until ctx ends; an error ends one watch, and
// the caller starts another.
type Watcher interface {
	Watch(ctx context.Context, changed func(envID string)) error
}

// ErrTimeout is a call whose outcome is unknown: the controller observes
// before anything else.
var ErrTimeout = errors.New("driver timed out; outcome unknown")

var validCategories = map[string]bool{"transient": true, "configuration": true, "permission": true, "conflict": true, "unknown": true}

// ExecCapability runs a script per call under the exec contract: the
// request as one JSON object on stdin, one CapabilityResult on stdout,
// diagnostics on stderr, non-zero exit for one scoped failure (whose
// stdout may still say its category), killed at the timeout.
type ExecCapability struct{ Exec }

// Do implements Capability.
func (c *ExecCapability) Do(ctx context.Context, r CapabilityRequest) (CapabilityResult, error) {
	var res CapabilityResult
	err := c.Run(ctx, r, &res)
	var de *Error
	switch {
	case err == nil:
	case errors.As(err, &de) && de.Timeout:
		return CapabilityResult{}, ErrTimeout
	case errors.As(err, &de) && de.Class == Scoped:
		// A scoped failure: keep the category the script named, if any.
		if res.Category == "" || !validCategories[res.Category] {
			res.Category = "unknown"
		}
		res.OK = false
		if res.Message == "" {
			res.Message = de.Msg
		}
		return res, nil
	default:
		return CapabilityResult{}, err
	}
	if !res.OK && !validCategories[res.Category] {
		return CapabilityResult{}, errorf(Scoped, "%s: failure without a valid category (%q)", c.Command[0], res.Category)
	}
	return res, nil
}

// Receipt is what the controller records of a call: the input and the
// output, verbatim.
type Receipt struct {
	Request CapabilityRequest `json:"request"`
	Result  CapabilityResult  `json:"result"`
	Error   string            `json:"error,omitempty"`
}

// Call runs c and records the receipt, whatever happened.
func Call(ctx context.Context, c Capability, r CapabilityRequest) (CapabilityResult, Receipt, error) {
	res, err := c.Do(ctx, r)
	rec := Receipt{Request: r, Result: res}
	if err != nil {
		rec.Error = err.Error()
	}
	return res, rec, err
}
