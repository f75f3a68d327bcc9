package persistence

import (
	"errors"
)

// Backend is the ordered, durable key space a Store keeps its records in
// (C1). Two implement it: Pebble (one node) and etcd (a cluster); one
// conformance suite (conformance_test.go) runs against both.
type Backend interface {
	// Get calls f with the value of key (valid only during the call), or
	// returns ErrNotFound.
	Get(key []byte, f func(val []byte) error) error
	// Scan calls f for every key in [lower, upper) in key order (upper nil:
	// to the end) until f returns false or an error.
	Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error
	// NewWrites starts an atomic batch of writes.
	NewWrites() Writes
	// Close releases the backend. Closing twice is harmless.
	Close() error
}

// Writes is one atomic batch.
type Writes interface {
	// Set copies key and val: the caller may reuse them once it returns.
	Set(key, val []byte)
	Delete(key []byte)
	// DeleteRange deletes every key in [lower, upper).
	DeleteRange(lower, upper []byte)
	Len() int
	// Commit applies every write or none, durably before it returns. With
	// a non-zero fence it applies only if the fence holds, and otherwise
	// fails with ErrFenced.
	Commit(f Fence) error
	Close()
}

// Fence is the condition of a cluster write (C3): the shard key must still
// be at the revision the writer acquired it at (its epoch). A lease that
// lapsed deleted the key; a new owner re-created it at a higher revision;
// either way the compare fails where the write lands.
type Fence struct {
	Key   string
	Epoch int64
	// Audit, if set, is a key the transaction also writes the epoch to: a
	// record, in the store's own history, of the epoch every write was
	// fenced at, which the cluster harness checks against the shard key's
	// history (no write accepted from a stale epoch, C6).
	Audit string
	// Guard and GuardRev make the write conditional on its entity too:
	// Guard (a key of the store, the entity's GuardKey) must still
	// be at GuardRev, the revision the writer read its record at, and the
	// write moves it. A transaction whose answer was lost may still land
	// after its read-back found it absent (a member paused with the
	// request in its socket); with the guard, either it or the writer's
	// next commit lands, never both, so no write computed from a record
	// that another write replaced can land over it.
	Guard    string
	GuardRev int64
}

// IsZero reports an unfenced (single-node) write.
func (f Fence) IsZero() bool { return f.Key == "" }

// ErrFenced: the writer no longer owns the shard at its epoch; nothing was
// written.
var ErrFenced = errors.New("fenced: this node no longer owns the shard at its epoch")

// ErrGuardMoved: the entity's record was written since the writer read it
// (an earlier write whose answer was lost landed after all); nothing was
// written, and the writer must read the record again (C14).
var ErrGuardMoved = errors.New("the entity's record changed since it was read (an earlier write whose answer was lost has landed); read it again")
