// Package errs gives every error warden answers with a Class, upspin-style:
// a Class is itself an error, so a package wraps it with its own words
// (fmt.Errorf("%w: marquee %s", errs.NotFound, id)), errors.Is still finds
// it, and the HTTP layer maps each class to one status code in one table
// instead of a ladder of sentinels from every package. These are the
// domain's classes; how the HTTP layer refuses a request it cannot read (a
// credential, a body, a method) is its own.
package errs

import (
	"context"
	"errors"
)

// Class classifies an error by what the caller can do about it.
type Class uint8

const (
	// Other is an unexpected failure: nothing the caller did, and nothing
	// it can fix; it may try again.
	Other Class = iota
	// Invalid: the request is malformed or breaks a rule about its own
	// content (400).
	Invalid
	// NotFound: the entity never existed (404).
	NotFound
	// Conflict: not allowed in the entity's current state (409).
	Conflict
	// Forbidden: a valid credential that does not speak for this entity
	// (403).
	Forbidden
	// IdempotencyKeyReused: a delivery id came again with another body
	// (409, T5).
	IdempotencyKeyReused
	// Overloaded: too much waits for the entity; come back soon (503).
	Overloaded
	// Unavailable: not now (starting, stopping, a write failed, an actor
	// did not answer in time); try again (503).
	Unavailable
	// Moving: in a cluster, the entity's shard has no owner this moment
	// (a node died or handed it over); try again in a second (503, C4).
	Moving
)

var names = [...]string{"other", "invalid", "not found", "conflict", "forbidden", "idempotency key reused", "overloaded", "unavailable", "shard moving"}

func (k Class) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return "class?"
}

// Error makes a Class an error of its own: the sentinel every package wraps.
func (k Class) Error() string { return k.String() }

// ClassOf is the class of err: the outermost Class it wraps; a context
// deadline is Unavailable; anything else is Other.
func ClassOf(err error) Class {
	if err == nil {
		return Other // before k, which errors.As puts on the heap
	}
	var k Class
	switch {
	case errors.As(err, &k):
		return k
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return Unavailable
	}
	return Other
}
