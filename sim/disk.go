package sim

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/sim/serial"
)

// diskFaults fails the next WAL write or sync of the simulated disk, under
// the real Pebble (S11): the store's own failure path runs, as on a real
// disk that fills or errs.
//
// Pebble's own goroutines (its cleaner removing obsolete files, its WAL
// flusher) call MaybeError too, so its state is behind a mutex; what they
// ask about is never what the fault is armed for, so the trace does not
// depend on them.
type diskFaults struct {
	mu    sync.Mutex
	armed string // "write", "sync" or ""
	fired bool
}

func (d *diskFaults) arm(kind string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = kind
}

func (d *diskFaults) isArmed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.armed != ""
}

// hasFired reports whether the armed fault fired.
func (d *diskFaults) hasFired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fired
}

// takeFired reports whether it fired, and forgets it.
func (d *diskFaults) takeFired() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fired
	d.fired = false
	return f
}

func (d *diskFaults) String() string { return "sim disk faults" }

// MaybeError fails the op the armed fault is for, once.
func (d *diskFaults) MaybeError(op errorfs.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed == "" || !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	switch {
	case d.armed == "write" && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt):
		d.armed, d.fired = "", true
		return fmt.Errorf("sim: disk full: %w", syscall.ENOSPC)
	case d.armed == "sync" && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo):
		d.armed, d.fired = "", true
		return fmt.Errorf("sim: I/O error: %w", syscall.EIO)
	}
	return nil
}

// refusedWrite is a transition whose write the disk failed: after the
// restart its entity must be as it was stored before (no unacknowledged
// write visible, I15).
type refusedWrite struct {
	id      string
	env     bool
	before  any
	existed bool
}

// armDiskFault arms a WAL fault for the write that is about to be made
// for entity id, and remembers what the store holds for it now.
func (w *world) armDiskFault(id string) {
	kind := ""
	switch {
	case w.faults.fire("storage.wal-write"):
		kind = "write"
	case w.faults.fire("storage.wal-sync"):
		kind = "sync"
	default:
		return
	}
	if !strings.HasPrefix(id, "m-") && !strings.HasPrefix(id, "env-") {
		// A pool's or a branch's write: the fault still fires under it;
		// only marquees and environments are compared after the restart.
		w.disk.arm(kind)
		return
	}
	r := &refusedWrite{id: id, env: strings.HasPrefix(id, "env-")}
	r.before, r.existed = w.storedState(r)
	w.disk.arm(kind)
	w.refused = r
	w.logf("disk: the WAL %s of %s's write will fail", kind, id)
}

// storedState reads what the store holds for the entity of r.
func (w *world) storedState(r *refusedWrite) (any, bool) {
	if r.env {
		rec, err := record.LoadEnvironment(w.store, r.id)
		return rec.Env, err == nil
	}
	rec, err := record.LoadMarquee(w.store, nil, r.id)
	return rec.State, err == nil
}

// storageFatal is the simulated process's Pebble Fatalf: the store has
// sealed (S1) and the process exits (S3), which the simulator runs as a
// crash: only what was synced survives.
func (w *world) storageFatal() {
	if !w.disk.takeFired() {
		w.violate("S1", "the store sealed without an injected disk fault: %v", w.store.Health().Failed())
	}
	w.cover("S1")
	w.p.crashAt = "storage"
	panic(serial.ProcessCrash{Point: "storage"})
}

// checkRefused runs after a restart: the write the disk failed is not
// there (S5, I15), and it was not acknowledged.
func (w *world) checkRefused() {
	r := w.refused
	if r == nil || w.disk.isArmed() {
		return // not failed yet: the entity wrote nothing since it was armed
	}
	w.refused = nil
	after, exists := w.storedState(r)
	if exists != r.existed || exists && !reflect.DeepEqual(after, r.before) {
		w.violate("I15", "%s's write failed on the disk, yet after the restart the store holds it (before: %v %+v; after: %v %+v)", r.id, r.existed, r.before, exists, after)
		return
	}
	w.cover("I15")
}

// checkSealed: a fault that fired must have stopped the process before
// any other commit (S1's "no further commit is attempted").
func (w *world) checkSealed() {
	if w.disk.hasFired() {
		w.violate("S1", "a commit succeeded after the disk failed a WAL %s", "write or sync")
	}
}
