package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// The store's health (docs/rules/storage.md): the first failure of the
// write path seals it, a store that can only be read is read-only
// until its disk is writable again, and a data directory short of
// space refuses new work. Every refusal is a *Failure, whose Cause
// names the problem in words the operator acts on.

// Cause is what went wrong with the disk, in words (S2).
type Cause string

// The causes a Failure names.
const (
	DiskFull  Cause = "disk full"
	ReadOnly  Cause = "read-only filesystem"
	IOError   Cause = "I/O error"
	Corrupted Cause = "corruption"
	// Unreachable is the cluster backend's: etcd's quorum lost or a
	// request that did not answer in time.
	Unreachable Cause = "store unreachable"
	QuotaFull   Cause = "etcd quota exceeded"
	// OutOfDescriptors: the process had no file descriptor left for the
	// store.
	OutOfDescriptors Cause = "out of file descriptors"
	Other            Cause = "storage error"
)

// ErrStorage is what every *Failure is: the HTTP layer answers it 503
// storage_unavailable.
var ErrStorage = errors.New("storage unavailable")

// ErrStorageLow refuses new work below the space reserve (S9): 507.
var ErrStorageLow = errors.New("storage low")

// Failure is a storage problem: its cause, the operation that met it, and
// the underlying error.
type Failure struct {
	Cause Cause
	// Op is what the store was doing ("WAL write", "flush", "open").
	Op  string
	Err error
	// Degraded is set for a read-only store: reads are served.
	Degraded bool
}

func (f *Failure) Error() string {
	if f.Degraded {
		return fmt.Sprintf("storage is read-only (%s): %s: %v", f.Cause, f.Op, f.Err)
	}
	return fmt.Sprintf("storage failed (%s): %s: %v", f.Cause, f.Op, f.Err)
}

// Unwrap makes a Failure both ErrStorage and its cause's error.
func (f *Failure) Unwrap() []error { return []error{ErrStorage, f.Err} }

// Classify names an error's cause: the errno it carries, or Pebble's
// corruption mark.
func Classify(err error) Cause {
	switch {
	case err == nil:
		return Other
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return DiskFull
	case errors.Is(err, syscall.EROFS):
		return ReadOnly
	case pebble.IsCorruptionError(err):
		return Corrupted
	case errors.Is(err, syscall.EIO):
		return IOError
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return OutOfDescriptors
	}
	return Other
}

// Health is one store's state: healthy, read-only, or sealed.
type Health struct {
	sealed   atomic.Pointer[Failure]
	readOnly atomic.Pointer[Failure]
	// unreachable is the cluster backend's: etcd without quorum or with
	// its quota alarm raised, until its monitor sees it well.
	unreachable atomic.Pointer[Failure]
	// stalled: Pebble holds writers back until a flush or compaction
	// catches up (its write stall), between its begin and end events.
	stalled  atomic.Bool
	sealedCh chan struct{}
	log      *slog.Logger
	// onSeal, if set, is told of the seal once (the server stops on it;
	// the durability barrier wakes its waiters).
	onSeal []func(*Failure)
	mu     sync.Mutex
}

func newHealth(log *slog.Logger) *Health {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Health{sealedCh: make(chan struct{}), log: log}
}

// Seal fails the store for good (S1): nothing is committed or read from it
// again in this process. The first seal wins and is logged once, as one
// ERROR line with its cause.
func (h *Health) Seal(f *Failure) {
	h.mu.Lock()
	if h.sealed.Load() != nil {
		h.mu.Unlock()
		return
	}
	h.sealed.Store(f)
	hooks := h.onSeal
	h.mu.Unlock()
	h.log.Error("storage failed: the store is sealed; writes and reads are refused and warden stops",
		"cause", string(f.Cause), "op", f.Op, "err", f.Err.Error())
	close(h.sealedCh)
	for _, hook := range hooks {
		hook(f)
	}
}

// sealFailure seals the store with err, met at op, and returns the seal's
// failure: err's, or an earlier one's if the store had already sealed.
func (h *Health) sealFailure(err error, op string) *Failure {
	h.Seal(&Failure{Cause: Classify(err), Op: op, Err: err})
	return h.Failed()
}

// OnSeal registers a function told once when the store seals (at once if
// it already has).
func (h *Health) OnSeal(f func(*Failure)) {
	h.mu.Lock()
	if s := h.sealed.Load(); s != nil {
		h.mu.Unlock()
		f(s)
		return
	}
	h.onSeal = append(h.onSeal, f)
	h.mu.Unlock()
}

// WriteStalled says whether commits are held back now by a write stall:
// a caller that would wait inside one rather than for an answer does not
// commit itself (runtime's Ask).
func (h *Health) WriteStalled() bool { return h.stalled.Load() }

// Sealed is closed when the store seals.
func (h *Health) Sealed() <-chan struct{} { return h.sealedCh }

// Failed is the seal's failure, or nil.
func (h *Health) Failed() *Failure { return h.sealed.Load() }

// ReadOnly is why the store is read-only (S4), or nil.
func (h *Health) ReadOnly() *Failure { return h.readOnly.Load() }

// writeRefusal is why a write may not be tried now, or nil.
func (h *Health) writeRefusal() error {
	if f := h.sealed.Load(); f != nil {
		return f
	}
	if f := h.readOnly.Load(); f != nil {
		return f
	}
	if f := h.unreachable.Load(); f != nil {
		return f
	}
	return nil
}

// readRefusal is why a read may not be served: only a seal, since a sealed
// Pebble's memory may hold a batch whose WAL write failed (S5).
func (h *Health) readRefusal() error {
	if f := h.sealed.Load(); f != nil {
		return f
	}
	return nil
}

// Problem is the store's failure or read-only reason, for /readyz: nil
// when it is writable.
func (h *Health) Problem() *Failure {
	if f := h.sealed.Load(); f != nil {
		return f
	}
	if f := h.readOnly.Load(); f != nil {
		return f
	}
	return h.unreachable.Load()
}

// setUnreachable records (or, with nil, clears) the cluster backend's
// problem.
func (h *Health) setUnreachable(f *Failure) {
	if f == nil {
		if h.unreachable.Swap(nil) != nil {
			h.log.Info("etcd answers again: writes resume")
		}
		return
	}
	if h.unreachable.Swap(f) == nil {
		h.log.Error("etcd cannot take writes: they are refused until it can", "cause", string(f.Cause), "op", f.Op, "err", f.Err.Error())
	}
}
