// Package environment is the pure state machine of one preview environment
// (rules E1-E16 and invariants I11-I14 in docs/rules/environment.md): a
// named promise that branch B at revision R is served at a URL, with every
// resource it owns.
//
// As with marquees, Machine.Step(env, event, now) returns the new record
// and an Outcome (an entity.Outcome): effects for the shell (driver calls, each carrying the
// attempt id and lease generation), and an audit of what was decided. The
// machine never trusts an exit status: an effect that reports success is
// followed by an observation, and only an observation that matches the
// declared identity and ownership advances the record.
package environment

import (
	"fmt"
	"slices"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Phase is a durable state name.
type Phase string

// The provisioning states, in order, then the removal states.
const (
	Requested        Phase = "requested"
	ArtifactReady    Phase = "artifact-ready"
	DataReady        Phase = "data-ready"
	AppStarting      Phase = "app-starting"
	AppReady         Phase = "app-ready"
	RouteActive      Phase = "route-active"
	Ready            Phase = "ready"
	RouteAtWaker     Phase = "route-at-waker"
	Sleeping         Phase = "sleeping"
	RemovalRequested Phase = "removal-requested"
	RouteDetached    Phase = "route-detached"
	AppStopped       Phase = "application-stopped"
	DataRemoved      Phase = "data-removed"
	VerifiedAbsent   Phase = "resources-verified-absent"
	Removed          Phase = "removed"
)

// UnmarshalText reads a stored state. "expiry-requested" is the name the
// first removal state had before a removal asked by an operator was
// reported as one (an operator's remove read "expiry-requested"); a
// record written then reads as "removal-requested".
func (p *Phase) UnmarshalText(b []byte) error {
	*p = Phase(b)
	if *p == "expiry-requested" {
		*p = RemovalRequested
	}
	return nil
}

// Phases lists every state in lifecycle order (lists filter by them).
var Phases = []Phase{Requested, ArtifactReady, DataReady, AppStarting, AppReady, RouteActive, Ready,
	RouteAtWaker, Sleeping, RemovalRequested, RouteDetached, AppStopped, DataRemoved, VerifiedAbsent, Removed}

// Capability is a kind of driver.
type Capability string

const (
	Artifact   Capability = "artifact"
	Database   Capability = "database"
	Migrations Capability = "migrations"
	App        Capability = "app"
	Route      Capability = "route"
	Smoke      Capability = "smoke"
	Notify     Capability = "notify"
)

// Op is what a driver is asked to do.
type Op string

const (
	Apply   Op = "apply"
	Observe Op = "observe"
	Remove  Op = "remove"
	// Sleep: a route sends its host to warden's waker; an application
	// is stopped, its container kept.
	Sleep Op = "sleep"
)

// step is one capability's part of a transition: an effect, then its
// verification by observation.
type step struct {
	cap Capability
	op  Op
}

// transition names its prerequisite (from), its result (to) and the steps
// whose verified observations complete it.
type transition struct {
	from, to Phase
	steps    []step
}

// transitions is the whole lifecycle: provisioning forward, sleep (taken
// only while the preview is desired asleep, Machine.nextFrom), removal
// forward. A wake is no transition of its own: a sleeping preview desired
// ready goes back to data-ready and provisions from there (E20).
// Removal takes the route, the application and the data; the
// artifact is a shared, immutable build output (one revision may serve
// several environments), so no environment owns or removes it (decided),
// unless the platform's artifacts are each environment's own
// (Machine.transitionFrom). Small, independently retryable: a failed
// readiness check never rebuilds the artifact or recreates the database.
var transitions = []transition{
	{Requested, ArtifactReady, []step{{Artifact, Apply}}},
	{ArtifactReady, DataReady, []step{{Database, Apply}, {Migrations, Apply}}},
	{DataReady, AppStarting, []step{{App, Apply}}},
	{AppStarting, AppReady, []step{{App, Observe}}},
	{AppReady, RouteActive, []step{{Route, Apply}}},
	{RouteActive, Ready, []step{{Smoke, Apply}}},
	{Ready, RouteAtWaker, []step{{Route, Sleep}}},
	{RouteAtWaker, Sleeping, []step{{App, Sleep}}},
	{RemovalRequested, RouteDetached, []step{{Route, Remove}}},
	{RouteDetached, AppStopped, []step{{App, Remove}}},
	{AppStopped, DataRemoved, []step{{Migrations, Remove}, {Database, Remove}}},
	{DataRemoved, VerifiedAbsent, []step{{Route, Observe}, {App, Observe}, {Database, Observe}}},
	{VerifiedAbsent, Removed, nil},
}

// StepCapabilities are the capabilities the lifecycle's steps call, in the
// order they first appear: the drivers a deployment must provide.
// Notifications are delivered by the shell's HTTP sender, not a driver.
var StepCapabilities = func() []Capability {
	var out []Capability
	for _, t := range transitions {
		for _, st := range t.steps {
			if !slices.Contains(out, st.cap) {
				out = append(out, st.cap)
			}
		}
	}
	return out
}()

// ActivatesRouteNext reports whether the next attempt would be the route
// activation, the one step that needs the branch's newest generation
// (Advance.BranchNewest).
func (e Env) ActivatesRouteNext() bool {
	t, ok := transitionFrom(e.State)
	return ok && e.Attempt == nil && e.Tombstone == nil && len(t.steps) > 0 && t.steps[0] == step{Route, Apply}
}

func transitionFrom(p Phase) (transition, bool) {
	for _, t := range transitions {
		if t.from == p {
			return t, true
		}
	}
	return transition{}, false
}

// transitionFrom is the lifecycle as this machine runs it: on a platform
// whose artifacts are each environment's own (Config.RemoveArtifacts, the
// local platform's images), removal also removes the artifact after
// the application, and verifies it absent with the rest.
func (m Machine) transitionFrom(p Phase) (transition, bool) {
	t, ok := transitionFrom(p)
	if !ok || !m.Config.RemoveArtifacts {
		return t, ok
	}
	switch p {
	case RouteDetached:
		t.steps = append(slices.Clone(t.steps), step{Artifact, Remove})
	case DataRemoved:
		t.steps = append(slices.Clone(t.steps), step{Artifact, Observe})
	}
	return t, ok
}

// Provisioning reports whether p is on the provisioning path or asleep
// (removal not started).
func (p Phase) Provisioning() bool {
	switch p {
	case Requested, ArtifactReady, DataReady, AppStarting, AppReady, RouteActive, Ready, RouteAtWaker, Sleeping:
		return true
	}
	return false
}

// DataPolicy says whether the environment's database may be thrown away.
type DataPolicy string

const (
	Disposable DataPolicy = "disposable"
	Preserve   DataPolicy = "preserve"
)

// Category of a structured failure.
type Category string

const (
	Transient     Category = "transient"
	Configuration Category = "configuration"
	Permission    Category = "permission"
	Conflict      Category = "conflict"
	Unknown       Category = "unknown"
)

// Lease guards work on a transition.
type Lease struct {
	Owner      string    `json:"owner"`
	Generation uint64    `json:"generation"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// Attempt is the intent recorded before an effect.
type Attempt struct {
	ID         string     `json:"id"`
	From       Phase      `json:"from"`
	To         Phase      `json:"to"`
	Step       int        `json:"step"`
	Capability Capability `json:"capability"`
	Op         Op         `json:"op"`
	Identity   string     `json:"identity"`
	// Verifying: the effect answered; its observation is out.
	Verifying bool `json:"verifying"`
	// Unknown: the effect's outcome is unknown (it timed out, or its
	// worker died and the attempt was taken over); Reapplied: the effect
	// was observed not to have happened and was asked for again, which
	// happens once per attempt without a back-off.
	Unknown   bool      `json:"unknown,omitempty"`
	Reapplied bool      `json:"reapplied,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Lease     Lease     `json:"lease"`
	// Input and Output of the last driver call of this attempt.
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
}

// Failure is a structured failure.
type Failure struct {
	Transition string   `json:"transition"`
	AttemptID  string   `json:"attempt_id"`
	Category   Category `json:"category"`
	Message    string   `json:"message"`
	Retryable  bool     `json:"retryable"`
	// Needs says what would make it retryable: backoff, new-input,
	// policy-repair, review.
	Needs     string    `json:"needs"`
	Resources []string  `json:"resources"`
	At        time.Time `json:"at"`
}

// Resource is one declared identity and what is known of it.
type Resource struct {
	Capability Capability `json:"capability"`
	Identity   string     `json:"identity"`
	ProviderID string     `json:"provider_id,omitempty"`
	Status     string     `json:"status"` // absent, present, removed
	Owner      string     `json:"owner,omitempty"`
}

// Receipt is the evidence that a step was verified.
type Receipt struct {
	Transition string     `json:"transition"`
	AttemptID  string     `json:"attempt_id"`
	Capability Capability `json:"capability"`
	Op         Op         `json:"op"`
	Identity   string     `json:"identity"`
	ProviderID string     `json:"provider_id,omitempty"`
	Detail     string     `json:"detail,omitempty"`
	At         time.Time  `json:"at"`
	// VerifiedBy is the op of the driver call that verified the step: an
	// apply or remove is verified by an observe, so a receipt of an
	// apply step records an observe call (they were told apart
	// by nothing).
	VerifiedBy Op `json:"verified_by"`
	// Input and Output are the verifying driver call, verbatim.
	Input  string `json:"input,omitempty"`
	Output string `json:"output,omitempty"`
}

// Notification is an outbox record committed with the state change it
// announces: the environment is ready, superseded by a newer
// preview of its branch, or removed (a pull request's status and
// comment follow all three). Its key names the environment, generation and
// event, so a repeated delivery carries the same identity.
type Notification struct {
	Key   string `json:"key"`
	Event string `json:"event"`
	URL   string `json:"url"`
	// What the receiver needs to place the news (a commit, a pull
	// request): the environment, its branch, revision and generation.
	EnvID      string `json:"env_id,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Revision   string `json:"revision,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
	// Detail is one line for people ("superseded by generation 4").
	Detail    string `json:"detail,omitempty"`
	Delivered bool   `json:"delivered"`
	// LastError is why the last delivery failed.
	LastError string    `json:"last_error,omitempty"`
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"created_at"`
}

// Notification events.
const (
	EventReady      = "environment-ready"
	EventSuperseded = "environment-superseded"
	EventRemoved    = "environment-removed"
)

// Drift is a difference between desired and observed.
type Drift struct {
	Capability Capability `json:"capability"`
	Identity   string     `json:"identity"`
	Desired    string     `json:"desired"`
	Observed   string     `json:"observed"`
	DetectedAt time.Time  `json:"detected_at"`
	// Outcome: auto-repair, repair, adopt, continue-removal, or "" while it
	// waits for an operator.
	Outcome string `json:"outcome,omitempty"`
	// ResolvedAt is when the outcome was carried out: the preview was
	// ready again, or removed. Zero while the drift is open or its
	// repair is under way.
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
}

// ActionRejectStaleResult is the audit's word for a worker's result
// refused because its attempt or lease had moved on: the one
// refusal an environment's record keeps, and explain lists as refused.
const ActionRejectStaleResult = "reject-stale-commit"

// AuditEntry records a manual action: who, what, why, when.
type AuditEntry struct {
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Tombstone is what remains after removal.
type Tombstone struct {
	Reason    string    `json:"reason"`
	RemovedAt time.Time `json:"removed_at"`
}

// Env is the durable record of one environment.
type Env struct {
	ID     string `json:"id"`
	Branch string `json:"branch"`
	// URL is the preview's public URL as its route driver observed it;
	// empty until the route is active, or when the driver says none.
	URL      string     `json:"url,omitempty"`
	Revision string     `json:"revision"`
	Data     DataPolicy `json:"data"`
	// DataFrom is the seed its database is a copy of ("": made empty).
	DataFrom string `json:"data_from,omitempty"`
	Desired  string `json:"desired"` // ready, asleep or removed
	State    Phase  `json:"state"`
	// Generation is the lifecycle generation; the route generation n of
	// route-<branch>-<n> is taken from it. Zero until the branch
	// gives it; AskedAt is when the branch was last asked.
	Generation uint64 `json:"generation"`
	// SleepAfter: a ready preview no request reached for this long is put
	// to sleep (0: never). ActiveAt is when it was last known in use: a
	// request its route served, as the proxy reports, or its becoming
	// ready. AsleepSince is when it was decided to sleep, while it is
	// desired asleep (E19).
	SleepAfter      time.Duration `json:"sleep_after,omitempty"`
	ActiveAt        time.Time     `json:"active_at,omitzero"`
	AsleepSince     time.Time     `json:"asleep_since,omitzero"`
	AskedAt         time.Time     `json:"asked_at,omitzero"`
	ExpiresAt       time.Time     `json:"expires_at,omitzero"`
	Attempt         *Attempt      `json:"attempt,omitempty"`
	AttemptSeq      uint64        `json:"attempt_seq"`
	LeaseGeneration uint64        `json:"lease_generation"`
	Receipts        []Receipt     `json:"receipts"`
	Resources       []Resource    `json:"resources"`
	LastFailure     *Failure      `json:"last_failure,omitempty"`
	// Failures counts consecutive transient failures of the current
	// transition; RetryAt is when the next attempt may start.
	Failures      int            `json:"failures"`
	RetryAt       time.Time      `json:"retry_at,omitzero"`
	Outbox        []Notification `json:"outbox"`
	Drift         []Drift        `json:"drift"`
	Audit         []AuditEntry   `json:"audit"`
	RemovalReason string         `json:"removal_reason,omitempty"`
	DataRemovalOK bool           `json:"data_removal_ok,omitempty"`
	// Trimmed counts receipts and audit entries dropped to keep the record
	// bounded (MaxReceipts, MaxAudit): the oldest go first.
	Trimmed int `json:"trimmed,omitempty"`
	// SupersededBy is the newer route generation of the same branch that
	// took the branch route from this preview: the route is never pulled
	// back to this one again, not even when the newer one is removed.
	SupersededBy uint64     `json:"superseded_by,omitempty"`
	Tombstone    *Tombstone `json:"tombstone,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// Identity is the declared name of a capability's resource, derived from
// the environment id before any external work.
func (e Env) Identity(c Capability) string {
	switch c {
	case Artifact:
		return fmt.Sprintf("artifact-%s-%s", e.ID, e.Revision)
	case Database, Migrations:
		return "db-" + e.ID
	case App, Smoke:
		return "app-" + e.ID
	case Route:
		return fmt.Sprintf("route-%s-%d", e.Branch, e.Generation)
	case Notify:
		return fmt.Sprintf("%s-%d", e.ID, e.Generation)
	}
	return ""
}

// ValidID accepts environment ids (the shared id alphabet).
func ValidID(id string) bool { return entity.ValidID(id) }

// MaxSeedName bounds a seed's name: the platform names its template
// database seed-<name>, within PostgreSQL's 63 bytes.
const MaxSeedName = 58

// ValidSeed accepts the name of a seed a preview's data is copied from.
func ValidSeed(name string) bool { return entity.ValidID(name) && len(name) <= MaxSeedName }

// ValidRevision accepts a commit or tag name usable inside a declared
// identity (the artifact's is artifact-<env>-<revision>): 1 to 64 of
// [A-Za-z0-9._-], starting with a letter or digit. No slashes or spaces,
// since drivers use identities as provider names and file names.
func ValidRevision(r string) bool {
	if r == "" || len(r) > 64 || !isAlnum(r[0]) {
		return false
	}
	for i := 0; i < len(r); i++ {
		if c := r[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
