// Package driver holds warden's ports to the outside world and their
// adapters: the GitHub Actions workflow dispatch, an exec driver for
// scripts, the HTTPS bootstrap probe and the control plane's chat count.
// Each port is an interface so that tests and the simulator can stand in
// for what cannot run here (GitHub, a cloud); every adapter bounds what it
// reads and never puts a secret into an error.
package driver

import (
	"context"
	"errors"
	"fmt"
)

// FailureClass classifies a driver failure so the caller can decide what to do.
type FailureClass string

const (
	// Transient failures may succeed if tried again later (429, 5xx,
	// network, timeout).
	Transient FailureClass = "transient"
	// Configuration failures will not succeed until someone changes the
	// configuration (4xx other than 429, a missing command).
	Configuration FailureClass = "configuration"
	// Scoped is one failure a script reported about the work it was asked
	// to do (non-zero exit).
	Scoped FailureClass = "scoped"
)

// Error is a classified driver failure. Its message never holds a secret.
type Error struct {
	Class FailureClass
	Msg   string
	// Timeout: the call ran out of time, so its outcome is unknown.
	Timeout bool
}

func (e *Error) Error() string { return string(e.Class) + ": " + e.Msg }

func errorf(k FailureClass, format string, args ...any) error {
	return &Error{Class: k, Msg: fmt.Sprintf(format, args...)}
}

// ClassOf returns the class of err, Transient for errors no driver classified.
func ClassOf(err error) FailureClass {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Transient
}

// DispatchRequest is one workflow dispatch (docs/rules/http-api.md, "Workflow
// dispatch"). The generation rides in the inputs so every callback echoes it.
// CallbackToken is the run's scoped credential: a secret, sent as a
// workflow input (GitHub masks it first) or on an exec driver's stdin,
// never in a URL, on a command line or in a log.
type DispatchRequest struct {
	MarqueeID     string `json:"marquee_id"`
	Generation    uint64 `json:"generation"`
	Action        string `json:"action"`
	CallbackURL   string `json:"callback_url"`
	CallbackToken string `json:"callback_token,omitempty"`
	// Epoch is the dispatching node's epoch for the marquee's shard in a
	// cluster (C3; 0 on a single node): a driver that remembers the
	// highest epoch it saw per marquee can refuse an obsolete caller.
	Epoch int64 `json:"epoch,omitempty"`
}

// Run is the workflow run a dispatch started, where the driver learns it:
// GitHub's dispatch API returns it when asked for run details; a
// script may print it. Zero when unknown.
type Run struct {
	ID  uint64 `json:"run_id,omitempty"`
	URL string `json:"run_url,omitempty"`
}

// Dispatcher starts a workflow run. It returns once the run is accepted, not
// when it finishes: the run calls back.
type Dispatcher interface {
	Dispatch(ctx context.Context, r DispatchRequest) (Run, error)
}

// BootstrapRequest asks for Traefik up, the wildcard certificate warmed and
// the free domain verified over HTTPS. It holds secrets: it goes to a
// driver on stdin or in memory, never on a command line or into a log.
type BootstrapRequest struct {
	MarqueeID  string `json:"marquee_id"`
	Generation uint64 `json:"generation"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	User       string `json:"user"`
	SSHKey     string `json:"ssh_private_key"`
	FreeDomain string `json:"free_domain"`
	ACMEDNS    any    `json:"acme_dns,omitempty"`
}

// Bootstrapper runs the bootstrap job; nil means verified.
type Bootstrapper interface {
	Bootstrap(ctx context.Context, r BootstrapRequest) error
}

// Chats is the control plane's count of a marquee's agent chats.
type Chats struct {
	Live      int `json:"live"`
	Reachable int `json:"reachable"`
}

// ControlPlane is what warden asks of the control plane: live chats before
// a downgrade and tearing down playgrounds on a host that is gone.
type ControlPlane interface {
	Chats(ctx context.Context, marqueeID string) (Chats, error)
	TeardownPlaygrounds(ctx context.Context, marqueeID string, generation uint64) error
}
