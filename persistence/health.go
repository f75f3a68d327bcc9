package persistence

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
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

// allOrNothingWAL makes every WAL write either whole or absent on a full
// disk. Without it a write that meets ENOSPC half-way leaves the first
// batches of its block in the file: their callers are refused (the sync
// failed), yet they are replayed after a restart, so a write warden said
// it did not make would appear. Pebble preallocates a WAL too,
// but ignores a preallocation that fails; this one reserves the blocks of
// each write before it is made and refuses the write, with nothing
// written, when they cannot be had.
//
// A write-ahead log that fails a write or a sync seals the store, and from
// then on takes nothing more to the disk: Pebble panics when closing the
// log it rotates away from fails (rotateWAL), and the panic unwinds
// through its locks into a fatal error (S7 says never a Go trace). So the
// failure is sealed, not returned; every later write to a log is dropped
// and no new sstable is made, so nothing written after the failure
// reaches the disk; and a commit that finds the store sealed after its
// sync is refused (pebbleWrites.Commit), never acknowledged.
//
// It also keeps a write-ahead log from failing to open for want of a
// file descriptor: Pebble panics when it cannot create the next log
// (rotateWAL), and the panic unwinds through its locks into a fatal
// error. On EMFILE or ENFILE a descriptor held for this (HoldDescriptors)
// is given up and the log opened again, and the store seals: the
// process stops with exit 74 instead of dying with a Go trace (S13).
type allOrNothingWAL struct {
	vfs.FS
	health *Health
}

// walReserveAhead is how far past a write the blocks are reserved, so that
// a reservation (one fallocate) is made once a MiB of WAL, not once a
// commit.
const walReserveAhead = 1 << 20

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs allOrNothingWAL) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.sealedAgainst(name); err != nil {
		return nil, err
	}
	f, err := fs.FS.Create(name, c)
	if err != nil && isWAL(name) && fs.outOfDescriptors(name, err) {
		f, err = fs.FS.Create(name, c)
	}
	if err != nil || !isWAL(name) {
		return f, err
	}
	return &reservingFile{File: f, health: fs.health, name: name}, nil
}

func (fs allOrNothingWAL) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.sealedAgainst(newname); err != nil {
		return nil, err
	}
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil && isWAL(newname) && fs.outOfDescriptors(newname, err) {
		f, err = fs.FS.ReuseForWrite(oldname, newname, c)
	}
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return &reservingFile{File: f, health: fs.health, name: newname}, nil
}

// sealedAgainst refuses a new file other than a log once the store
// sealed: a flush after a log's failure would take the memtable's
// unacknowledged batches into an sstable. A log is still opened (Pebble
// panics if it cannot be), and takes nothing (reservingFile).
func (fs allOrNothingWAL) sealedAgainst(name string) error {
	if fs.health == nil || isWAL(name) {
		return nil
	}
	if f := fs.health.Failed(); f != nil {
		return fmt.Errorf("%s not written: %w", name, f)
	}
	return nil
}

// outOfDescriptors seals the store when err is the process running out of
// descriptors, and reports whether a held one was given up for a retry.
func (fs allOrNothingWAL) outOfDescriptors(name string, err error) bool {
	if !errors.Is(err, syscall.EMFILE) && !errors.Is(err, syscall.ENFILE) {
		return false
	}
	if fs.health != nil {
		fs.health.Seal(&Failure{Cause: OutOfDescriptors, Op: "open the write-ahead log " + name, Err: err})
	}
	return releaseHeld()
}

// held are descriptors kept open for the store's next write-ahead log.
var held struct {
	sync.Mutex
	files []*os.File
}

// HoldDescriptors keeps n descriptors open for the store: given up
// one at a time when a write-ahead log cannot be opened for want of one.
func HoldDescriptors(n int) error {
	held.Lock()
	defer held.Unlock()
	for len(held.files) < n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fmt.Errorf("hold a file descriptor for the store: %w", err)
		}
		held.files = append(held.files, f)
	}
	return nil
}

func releaseHeld() bool {
	held.Lock()
	defer held.Unlock()
	if len(held.files) == 0 {
		return false
	}
	last := held.files[len(held.files)-1]
	held.files = held.files[:len(held.files)-1]
	return last.Close() == nil
}

// Lock takes Pebble's directory lock; on a read-only filesystem, where
// the lock file cannot be opened for writing, it is not needed: nobody
// can write the store there, and warden.lock already keeps a second
// warden out (S4's read-only start).
func (fs allOrNothingWAL) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	if errors.Is(err, syscall.EROFS) {
		return io.NopCloser(nil), nil
	}
	return c, err
}

// Unwrap lets Pebble see the filesystem underneath.
func (fs allOrNothingWAL) Unwrap() vfs.FS { return fs.FS }

type reservingFile struct {
	vfs.File
	health           *Health
	name             string
	offset, reserved int64
	unsupported      bool
}

func (f *reservingFile) Write(p []byte) (int, error) {
	if f.dropping() {
		return len(p), nil
	}
	end := f.offset + int64(len(p))
	if end > f.reserved && !f.unsupported {
		if err := f.reserve(end); err != nil {
			return f.failedWrite(0, p, err) // nothing of p is written
		}
	}
	n, err := f.File.Write(p)
	f.offset += int64(n)
	if err != nil {
		return f.failedWrite(n, p, err)
	}
	return n, nil
}

// failedWrite is a write that failed after n bytes: sealed (fail), it
// reports p written, the rest dropped as everything after it is.
func (f *reservingFile) failedWrite(n int, p []byte, err error) (int, error) {
	if err = f.fail(err); err != nil {
		return n, err
	}
	return len(p), nil
}

func (f *reservingFile) Sync() error {
	if f.dropping() {
		return nil
	}
	return f.fail(f.File.Sync())
}

// SyncData is the file's own (fdatasync), not Sync: it is the sync of
// every durable commit.
func (f *reservingFile) SyncData() error {
	if f.dropping() {
		return nil
	}
	return f.fail(f.File.SyncData())
}

func (f *reservingFile) SyncTo(length int64) (fullSync bool, err error) {
	if f.dropping() {
		return true, nil
	}
	fullSync, err = f.File.SyncTo(length)
	return fullSync, f.fail(err)
}

// dropping is true once the store sealed: nothing more goes to a log.
func (f *reservingFile) dropping() bool { return f.health != nil && f.health.Failed() != nil }

// fail seals the store with a log's failure and hides it from Pebble, so
// that Pebble goes on (a commit waiting for its sync then finds the store
// sealed and is refused, and whatever Pebble writes next is dropped);
// without a Health to seal, the error is Pebble's. A nil err is nil.
func (f *reservingFile) fail(err error) error {
	if err == nil || f.health == nil {
		return err
	}
	f.health.Seal(&Failure{Cause: Classify(err), Op: walFailureOp, Err: fmt.Errorf("%s: %w", f.name, err)})
	return nil
}

// walFailureOp names a write-ahead log's failed write or sync in a seal.
const walFailureOp = "WAL write or sync"

// reserve makes the blocks up to end (and, if it can, a MiB beyond) the
// file's own; a filesystem without fallocate is written as it is.
func (f *reservingFile) reserve(end int64) error {
	err := f.File.Preallocate(f.reserved, end+walReserveAhead-f.reserved)
	if err == nil {
		f.reserved = end + walReserveAhead
		return nil
	}
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		f.unsupported = true
		return nil
	}
	if err = f.File.Preallocate(f.reserved, end-f.reserved); err != nil {
		return err // nothing of p is written
	}
	f.reserved = end
	return nil
}
