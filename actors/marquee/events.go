package marquee

import (
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/entity"
)

// Event is anything that can happen to a marquee: an operator command, a
// callback, the result of an effect, or a deadline falling due.
type Event interface{ isEvent() }

// Create is the operator's create. It is handled by Machine.Create,
// since there is no state before it.
type Create struct {
	ID         string
	Kind       Origin
	Pool       string
	Connection *Connection
	// By names the operator who asked; it goes into the history.
	By string
}

// Redeploy is the fix-redeploy button. By, on every operator command,
// names the operator the token identified; it goes into the history.
type Redeploy struct{ By string }

// Destroy tears the VM down; Reap asks for a tombstone once destroyed.
type Destroy struct {
	Reap bool
	By   string
}

// Disable and Enable set the serving status.
type Disable struct{ By string }
type Enable struct{ By string }

// RunNow is the operator's "run now": the waiting back-off is cut
// short and its transition made at once.
type RunNow struct{ By string }

// Callback is a Terraform webhook (M9-M20), already authenticated and
// decoded by the HTTP layer.
type Callback struct {
	Verb       Verb
	Generation uint64
	Step       Progress
	Connection *Connection
	Reason     string
	// DeliveryID (the Webhook-Id) and Auth (how the sender proved who it
	// is) are the shell's; the step copies them onto the history line
	// so that every acknowledged delivery can be found again.
	DeliveryID string
	Auth       string
	// OIDC is the run a GitHub OIDC token speaks for, set by the
	// shell; such a callback is refused before anything is read for it
	// unless the marquee dispatched that run (AuthorizeRun).
	OIDC *OIDCRun
}

// OIDCRun is what a verified OIDC token says of its run: its id (0 if the
// token had none) and whether a scoped credential vouched for the marquee
// and generation as well.
type OIDCRun struct {
	RunID         uint64
	ScopedVouched bool
}

// AdmissionDecided is the pool's answer to AskAdmission, or a later grant
// of a queued job.
type AdmissionDecided struct {
	Status   AdmissionStatus
	Sequence uint64
}

// DispatchOutcome classifies a dispatch driver's answer.
type DispatchOutcome string

const (
	DispatchOK DispatchOutcome = "sent"
	// DispatchTransient: 429, 5xx, network; the stuck retries will
	// dispatch again under a new generation.
	DispatchTransient DispatchOutcome = "transient"
	// DispatchConfiguration: a 4xx other than 429; retrying blindly cannot
	// help, so the attempt fails at once.
	DispatchConfiguration DispatchOutcome = "configuration"
)

// DispatchFinished is the dispatch driver's answer for one generation.
// RunID and RunURL are the run GitHub started, where it said.
type DispatchFinished struct {
	Generation uint64
	Outcome    DispatchOutcome
	Detail     string
	RunID      uint64
	RunURL     string
}

// BootstrapFinished is the bootstrap job's result for one generation.
type BootstrapFinished struct {
	Generation uint64
	OK         bool
	Detail     string
}

// ChatsAnswered is the control plane's answer about live reachable chats.
// Err set means unreachable or garbage: the marquee is preserved.
type ChatsAnswered struct {
	Generation uint64
	Live       int
	Reachable  int
	Err        string
}

// RetryDue: the marquee may be stuck.
type RetryDue struct{ Generation uint64 }

// ProvisioningTimedOut: the attempt has been provisioning too long.
type ProvisioningTimedOut struct{ Generation uint64 }

// BootstrapRetryDue: a failed bootstrap may run again.
type BootstrapRetryDue struct{ Generation uint64 }

// NullExpired: a pending first null passed its window.
type NullExpired struct{}

// ChatsRecheckDue: the control plane could not answer; ask again.
type ChatsRecheckDue struct{ Generation uint64 }

// Reconcile is sent to an actor that starts after a crash or restart: every
// effect whose outcome the snapshot cannot know is settled before new work.
// AfterFailure says the actor itself crashed (the process lived on): effects
// whose intent leaves no mark in the snapshot (a slot release, a teardown)
// may have been lost between the commit and their start, so they are sent
// again; both are idempotent.
type Reconcile struct{ AfterFailure bool }

func (Create) isEvent()               {}
func (Redeploy) isEvent()             {}
func (Destroy) isEvent()              {}
func (Disable) isEvent()              {}
func (Enable) isEvent()               {}
func (RunNow) isEvent()               {}
func (Callback) isEvent()             {}
func (AdmissionDecided) isEvent()     {}
func (DispatchFinished) isEvent()     {}
func (BootstrapFinished) isEvent()    {}
func (ChatsAnswered) isEvent()        {}
func (RetryDue) isEvent()             {}
func (ProvisioningTimedOut) isEvent() {}
func (BootstrapRetryDue) isEvent()    {}
func (NullExpired) isEvent()          {}
func (ChatsRecheckDue) isEvent()      {}
func (Reconcile) isEvent()            {}

// Effect is work the shell starts after the transition is persisted. Every
// effect that comes back as an event carries the generation it was started
// for, so a result that arrives after the marquee moved on is stale.
type Effect interface{ isEffect() }

// StartDispatch sends the workflow dispatch for a generation.
type StartDispatch struct {
	Generation uint64
	Action     Action
}

// AskAdmission asks the pool for a slot.
type AskAdmission struct{ Pool string }

// ReleaseAdmission gives back a slot or queue place.
type ReleaseAdmission struct{ Pool string }

// StartBootstrap runs the bootstrap job for the stored connection.
type StartBootstrap struct{ Generation uint64 }

// AskChats asks the control plane for live reachable chats.
type AskChats struct{ Generation uint64 }

// TeardownPlaygrounds removes the playgrounds on a host that is gone (M14,
// M16).
type TeardownPlaygrounds struct{ Generation uint64 }

func (StartDispatch) isEffect()       {}
func (AskAdmission) isEffect()        {}
func (ReleaseAdmission) isEffect()    {}
func (StartBootstrap) isEffect()      {}
func (AskChats) isEffect()            {}
func (TeardownPlaygrounds) isEffect() {}

// Source of a history entry.
type Source string

const (
	SourceCallback     Source = "callback"
	SourceOperator     Source = "operator"
	SourceTimer        Source = "timer"
	SourceBootstrap    Source = "bootstrap"
	SourceControlPlane Source = "control_plane"
	SourceAdmission    Source = "admission"
	SourceDispatch     Source = "dispatch"
	SourceRecovery     Source = "recovery"
)

// Entry is one line of a marquee's history. It never holds a secret.
type Entry struct {
	At                 time.Time `json:"at"`
	Source             Source    `json:"source"`
	Verb               string    `json:"verb"`
	Generation         uint64    `json:"generation"`
	ReceivedGeneration uint64    `json:"received_generation,omitempty"`
	Result             Answer    `json:"result"`
	Detail             string    `json:"detail,omitempty"`
	// DeliveryID is the callback's Webhook-Id, so that every acknowledged
	// delivery can be found again.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Actor is the operator who asked, for operator entries.
	Actor string `json:"actor,omitempty"`
	// Auth is how a callback proved who sent it (scoped, shared,
	// standard-webhooks, github-oidc).
	Auth string `json:"auth,omitempty"`
	// Changed is what the step changed of the marquee's traced fields, on
	// the last entry of the step that changed them: the history replays
	// to the record's state.
	Changed []Change `json:"changed,omitempty"`
}

// Outcome is what one step produced besides the new state: the callback's
// result as its Answer, history lines as its Records (entity.Outcome).
type Outcome = entity.Outcome[Answer, Effect, Entry]

// String methods print effects and history lines the same way in golden
// files and logs.

func (e StartDispatch) String() string {
	return fmt.Sprintf("dispatch(%s,gen=%d)", e.Action, e.Generation)
}
func (e AskAdmission) String() string { return "ask-admission(" + e.Pool + ")" }
func (e ReleaseAdmission) String() string {
	return "release-admission(" + e.Pool + ")"
}
func (e StartBootstrap) String() string { return fmt.Sprintf("bootstrap(gen=%d)", e.Generation) }
func (e AskChats) String() string       { return fmt.Sprintf("ask-chats(gen=%d)", e.Generation) }
func (e TeardownPlaygrounds) String() string {
	return fmt.Sprintf("teardown-playgrounds(gen=%d)", e.Generation)
}

func (e Entry) String() string {
	s := fmt.Sprintf("%s %s %s: %s", e.Source, e.Verb, e.Result, e.Detail)
	if e.ReceivedGeneration != 0 {
		s += fmt.Sprintf(" [gen %d, received %d]", e.Generation, e.ReceivedGeneration)
	}
	return s
}
