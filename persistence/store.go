// Package persistence is warden's durable record: a Store over one Backend,
// Pebble v2 on a single node (the default) or etcd in a cluster.
//
// Every entity transition is written as one Batch, committed atomically and
// durably before any effect starts and before anyone is answered: on Pebble
// with pebble.Sync (fsync of the WAL; concurrent commits from many actors
// share WAL syncs through Pebble's commit pipeline, so a sync per
// transition does not mean an fsync per transition), on etcd as one
// transaction, committed by a quorum of members. In a cluster the
// transaction also compares the entity's shard key with the writer's epoch,
// so a writer whose lease lapsed commits nothing.
//
// # Key layout
//
// Keys are ASCII, one prefix byte and a slash per record family, so that a
// family is one contiguous range:
//
//	m/<marquee id>                  marquee snapshot, with the newest chunk
//	                                of its deliveries (format 4)
//	h/<marquee id>/<seq %016x>      history entry
//	r/<entity id>#<slot 0-8>        a chunk of the entity's last deliveries
//	                                and their first answers (Deliveries,
//	                                M20, T5), written when it fills
//	r/<entity id>                   the whole record, the layout before
//	                                chunks (format 2): read, then written
//	                                again as chunks
//	d/<entity id>/<delivery id>     one delivery's record, the layout before
//	                                r/ (DedupRecord): read, never written,
//	                                pruned at the end of its retention
//	p/<pool>                        pool metadata
//	a/<pool>/<job>                  admission record
//	e/<environment id>              environment record, with the newest
//	                                chunk of its deliveries (format 4)
//	b/<branch>/<generation %016x>   a route generation given out (empty)
//	w/<unix nanos %016x>/<k>/<id>   wake index: the entity (k: m marquee,
//	                                e environment) has a deadline or unsettled
//	                                effects at that time (empty value)
//	g/<kind>/<id>                   a cluster entity's guard: the
//	                                revision of its last commit (etcd only)
//	x/floor/<n %016x>               the benchmark floor's writes
//	                                (internal/benchfloor, --bench-noop only)
//	z/data-loss/<unix nanos %016x>  audit of a repair that dropped data
//
// The records' codecs are their kinds' (actors): this package knows the
// families' names, not their types, and imports nothing of actors/.
//
// # Encoding
//
// Every value is one version byte followed by JSON, except an entity's
// deliveries (r/), written with every delivery, which are binary (see
// Deliveries). The version says how the rest is read; a value whose version or JSON does not decode, or that fails
// validation, is reported as Malformed with its key and reason, never
// skipped silently and never allowed to hide its neighbours.
package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is returned for a key that holds nothing; callers wrap it in
// their own words and error kind.
var ErrNotFound = errors.New("not found")

// Malformed is a stored record that could not be used, with why.
type Malformed struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// CorruptError is a record that failed to decode or validate.
type CorruptError struct{ Malformed }

func (e *CorruptError) Error() string { return fmt.Sprintf("record %s: %s", e.Key, e.Reason) }

// Options for Open.
type Options struct {
	// FS replaces the real filesystem (vfs.NewMem for tests and the
	// simulator). Nil means the OS.
	FS vfs.FS
	// NoSync commits without fsync. Only the benchmark's baseline uses it;
	// it would break I5 in production.
	NoSync bool
	// Logger receives Pebble's messages and the store's own.
	Logger *slog.Logger
	// OnFatal runs where a write-path failure sealed the store: in
	// Pebble's Fatalf, which it must not return from, and in a commit
	// whose WAL sync failed. Nil blocks Pebble's goroutine for ever and
	// refuses the commit; the simulator crashes its process at both.
	OnFatal func()
	// Degrade opens a store that cannot be written (a full disk, a
	// read-only filesystem) read-only instead of refusing it.
	Degrade bool
	// AcceptDataLoss truncates a WAL damaged in the middle at the damage,
	// keeps the original beside it and records what was dropped in an
	// audit entry, instead of refusing to open; a store below its
	// high-water mark opens as it is, the missing commits audited.
	AcceptDataLoss bool
	// MaxOpenFiles bounds the sstables Pebble keeps open (0: Pebble's
	// default, 1000): warden splits its descriptors at start.
	MaxOpenFiles int
	// MarkEvery is how often the high-water mark is written while the
	// store serves (0: every second); negative: only at a clean close
	// (the simulator, whose crashes never lose a synced write and whose
	// runs must not depend on a wall-clock ticker).
	MarkEvery time.Duration
}

// Store is the durable record over one Backend: Pebble for a single node,
// etcd for a cluster.
type Store struct {
	// mu guards kv against the switch from read-only to read-write:
	// every use holds it shared.
	mu     sync.RWMutex
	kv     Backend
	health *Health
	// vis holds reads back until what they saw is durable: Pebble shows a
	// batch to readers once it is in the memtable, before its WAL sync has
	// returned. Nil for etcd, which shows only committed writes.
	vis  *visibility
	dir  string
	opts Options
	// closed: Close has run; a read or write after it is refused (Pebble
	// panics on a closed database), under mu.
	closed bool
	// legacyState says whether the store may hold format 1's d/
	// records (deliveries.go): unknown until the first entity's
	// deliveries are read, then kept, since nothing writes them now.
	legacyState atomic.Int32
}

// errClosed refuses what comes after Close: an effect that outlived its
// system's stop, say.
var errClosed = &Failure{Cause: Other, Op: "use", Err: errors.New("the store is closed")}

// Open opens (or creates) a Pebble store in dir: the single-node default.
func Open(dir string, o Options) (*Store, error) {
	h := newHealth(o.Logger)
	kv, err := openWritable(dir, o, h)
	var f *Failure
	if err != nil && o.Degrade && errors.As(err, &f) && (f.Cause == DiskFull || f.Cause == ReadOnly) {
		if kv, err = openChecked(dir, o, h, true, false); err == nil {
			h.readOnly.Store(&Failure{Cause: f.Cause, Op: f.Op, Err: f.Err, Degraded: true})
			logger(o.Logger).Warn("store opened read-only: reads are served, writes refused until the disk is writable",
				"data", dir, "cause", string(f.Cause), "err", f.Err.Error())
		}
	}
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, health: h, vis: newVisibility(h), dir: dir, opts: o}, nil
}

// openWritable opens dir read-write once its filesystem has shown it can
// take a write, repairing a damaged WAL first when asked.
func openWritable(dir string, o Options, h *Health) (*pebbleBackend, error) {
	if o.FS == nil {
		if err := probeWritable(dir); err != nil {
			return nil, err
		}
	}
	kv, err := openChecked(dir, o, h, false, o.AcceptDataLoss)
	var c *CorruptStoreError
	if err != nil && o.AcceptDataLoss && errors.As(err, &c) && c.WAL != "" {
		loss, rerr := truncateWAL(o.FS, c)
		if rerr != nil {
			return nil, fmt.Errorf("%w; and the repair failed: %v", err, rerr)
		}
		if kv, err = openChecked(dir, o, h, false, true); err == nil {
			err = recordDataLoss(kv, loss, logger(o.Logger))
		}
	}
	return kv, err
}

// OpenBackend wraps any Backend (the etcd one in a cluster) as a Store;
// log receives its health's changes (nil: none).
func OpenBackend(kv Backend, log *slog.Logger) *Store {
	h := newHealth(log)
	if hb, ok := kv.(interface{ setHealth(*Health) }); ok {
		hb.setHealth(h)
	}
	return &Store{kv: kv, health: h}
}

// checker is a backend whose health is looked at, not only reported by
// its failures: the cluster's.
type checker interface {
	check(ctx context.Context) *Failure
}

// Monitor watches the cluster backend's health until ctx ends,
// every monitorEvery; on Pebble it returns at once (its failures report
// themselves).
func (s *Store) Monitor(ctx context.Context) {
	if _, ok := s.kv.(checker); !ok {
		return
	}
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		s.CheckHealth(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckHealth looks at the cluster backend's health once: a raised alarm
// or a lost quorum is recorded, and a store found well again takes writes.
// Monitor calls it on a ticker; the simulator on its clock.
func (s *Store) CheckHealth(ctx context.Context) {
	if c, ok := s.kv.(checker); ok {
		s.health.setUnreachable(c.check(ctx))
	}
}

// Health is the store's state: sealed, read-only or writable (S1-S4).
func (s *Store) Health() *Health { return s.health }

// Close closes the backend. Closing twice is harmless; a sealed store is
// not closed (S3: its Pebble may never finish a close).
//
// Close waits for the reads and writes in hand, so that none meets a
// closed database; a write stuck in a store that sealed under it never
// returns, so a sealed store is let go instead of waited for.
func (s *Store) Close() error {
	for !s.mu.TryLock() {
		if f := s.health.Failed(); f != nil {
			return fmt.Errorf("not closed: %w", f)
		}
		time.Sleep(time.Millisecond)
	}
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.kv.Close()
}

// Abandon lets go of a sealed store without waiting for it: its Pebble is
// closed in the background, if it can be, so that a process that runs on
// (the simulator, after a simulated crash) does not keep it forever.
func (s *Store) Abandon() {
	pb, ok := s.kv.(*pebbleBackend)
	if !ok {
		return
	}
	go func() {
		defer func() { _ = recover() }() // a sealed Pebble may refuse to close
		pb.closeOnce.Do(func() { pb.closeErr = pb.db.Close() })
	}()
}

// TryWritable is the read-only store's retry: if the data
// directory's filesystem takes a write now, the store is reopened
// read-write and true returned. Reads wait while it switches.
func (s *Store) TryWritable() (bool, error) {
	if s.health.Failed() != nil {
		return false, nil
	}
	if s.health.ReadOnly() == nil {
		return true, nil
	}
	if s.opts.FS == nil {
		if err := probeWritable(s.dir); err != nil {
			return false, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kv.Close(); err != nil {
		return false, fmt.Errorf("close the read-only store: %w", err)
	}
	kv, err := openChecked(s.dir, s.opts, s.health, false, false)
	if err != nil {
		// Still not writable: back to reading.
		ro, rerr := openChecked(s.dir, s.opts, s.health, true, false)
		if rerr != nil {
			return false, fmt.Errorf("reopen read-only after %v: %w", err, rerr)
		}
		s.kv = ro
		return false, nil
	}
	s.kv = kv
	s.health.readOnly.Store(nil)
	logger(s.opts.Logger).Info("store writable again", "data", s.dir)
	return true, nil
}

// Get reads one record into v: ErrNotFound, a *CorruptError, or the
// store's refusal. Reads are refused once the store is sealed and answered
// only once everything they may have seen is durable.
func (s *Store) Get(key []byte, v any) error {
	return s.read(func(kv Backend) error {
		return kv.Get(key, func(val []byte) error { return Decode(key, val, v) })
	})
}

// read runs one read of the backend under the store's rules.
func (s *Store) read(f func(kv Backend) error) error {
	if err := s.health.readRefusal(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	err := f(s.kv)
	s.mu.RUnlock()
	if werr := s.vis.wait(); werr != nil {
		return werr
	}
	return err
}

// ListPage is one page of a record family in key order, the paging,
// filtering and scan budget every list shares: up to limit records that
// keep accepts after the id `after`, reading at most maxScan records (0:
// no bound; spent, the page ends at the last record read), the id to go
// on after ("" at the end), and the records that did not decode.
func ListPage[T any](s *Store, prefix, after string, limit, maxScan int, read func(k, v []byte) (T, error), keep func(T) bool) ([]T, string, []Malformed, error) {
	var out []T
	var bad []Malformed
	var start []byte
	if after != "" {
		start = append([]byte(prefix+after), 0)
	}
	next, lastRead, lastKept, scanned := "", "", "", 0
	err := s.Scan([]byte(prefix), start, func(k, v []byte) (bool, error) {
		if maxScan > 0 && scanned == maxScan {
			next = lastRead
			return false, nil
		}
		scanned++
		id := string(k[len(prefix):])
		lastRead = id
		rec, err := read(k, v)
		if err != nil {
			bad = append(bad, err.(*CorruptError).Malformed)
			return true, nil
		}
		if keep != nil && !keep(rec) {
			return true, nil
		}
		if len(out) == limit {
			next = lastKept
			return false, nil
		}
		out = append(out, rec)
		lastKept = id
		return true, nil
	})
	return out, next, bad, err
}

// Scan calls f for every key with the prefix, in key order, from start
// (inclusive; nil means the prefix start). f returns false to stop; k and
// v are valid only during the call.
func (s *Store) Scan(prefix, start []byte, f func(k, v []byte) (bool, error)) error {
	lower := prefix
	if start != nil {
		lower = start
	}
	return s.read(func(kv Backend) error { return kv.Scan(lower, prefixEnd(prefix), f) })
}

// ScanReverse calls f for every key under prefix, the last first, until f
// returns false or an error: the newest of a family whose keys sort by
// age is one step. A backend that cannot read backwards (the cluster's)
// is scanned forwards and its keys handed back in reverse.
func (s *Store) ScanReverse(prefix []byte, f func(k, v []byte) (bool, error)) error {
	return s.read(func(kv Backend) error {
		if r, ok := kv.(interface {
			ScanReverse(lower, upper []byte, f func(k, v []byte) (bool, error)) error
		}); ok {
			return r.ScanReverse(prefix, prefixEnd(prefix), f)
		}
		var kvs [][2][]byte
		err := kv.Scan(prefix, prefixEnd(prefix), func(k, v []byte) (bool, error) {
			kvs = append(kvs, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return true, nil
		})
		for i := len(kvs) - 1; i >= 0 && err == nil; i-- {
			var more bool
			if more, err = f(kvs[i][0], kvs[i][1]); !more {
				break
			}
		}
		return err
	})
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// Has reports whether a key holds a value, without decoding it: enough for
// the registry to decide whether an entity exists before activating it
// (the actor decodes the record once, when it loads).
func (s *Store) Has(key []byte) (bool, error) {
	err := s.read(func(kv Backend) error { return kv.Get(key, func([]byte) error { return nil }) })
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ForEach calls f with every key and value in the store, in key order:
// a raw view for tests that prove a refusal wrote nothing (T12) and for
// debugging. The value is only valid during the call.
func (s *Store) ForEach(f func(k, v []byte) error) error {
	return s.Scan(nil, nil, func(k, v []byte) (bool, error) { return true, f(k, v) })
}

// Batch collects one transition's writes; Commit makes them durable
// together.
type Batch struct {
	s     *Store
	kv    Backend
	w     Writes
	fence Fence
	rev   int64
}

// NewBatch starts a transition.
func (s *Store) NewBatch() *Batch {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &Batch{s: s, kv: s.kv, w: s.kv.NewWrites()}
}

// Fence makes the commit conditional on the writer still owning the
// entity's shard at its epoch; a batch without one is a single node's.
func (b *Batch) Fence(f Fence) { b.fence = f }

// Put stages v, encoded as Encode does, under key. It encodes into a
// pooled buffer, since every backend copies what it is given: the
// durable path's records were a third of its allocations.
func (b *Batch) Put(key []byte, v any) {
	buf := encodeBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	encodeRecord(buf, v)
	b.w.Set(key, buf.Bytes())
	if buf.Cap() <= maxPooledBuffer {
		encodeBuffers.Put(buf)
	}
}

// encodeBuffers hold Put's encodings; one over maxPooledBuffer (a rare
// large record) is left to the collector rather than kept.
var encodeBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 64 << 10

// Set stages bytes as they are (an empty value of an index entry; tests
// planting malformed records).
func (b *Batch) Set(key, val []byte) { b.w.Set(key, val) }

// Delete stages the removal of key.
func (b *Batch) Delete(key []byte) { b.w.Delete(key) }

// DeleteRange stages the deletion of every key in [lower, upper).
func (b *Batch) DeleteRange(lower, upper []byte) { b.w.DeleteRange(lower, upper) }

// Len is the number of writes staged.
func (b *Batch) Len() int { return b.w.Len() }

// Commit makes the batch durable: synced before it returns, or not written
// at all. A fenced batch whose fence no longer holds fails with ErrFenced.
//
// Nothing is tried on a sealed or read-only store. A write the
// backend failed is a *Failure naming its cause.
func (b *Batch) Commit() error {
	defer b.w.Close()
	if err := b.s.health.writeRefusal(); err != nil {
		return err
	}
	b.s.mu.RLock()
	defer b.s.mu.RUnlock()
	if b.s.closed {
		return errClosed
	}
	if b.kv != b.s.kv {
		return &Failure{Cause: Other, Op: "commit", Err: errors.New("the store was reopened while this write was prepared; try again")}
	}
	ticket := b.s.vis.begin()
	err := b.w.Commit(b.fence)
	b.s.vis.end(ticket)
	if r, ok := b.w.(revisioned); ok {
		b.rev = r.Revision()
	}
	if err != nil {
		var f *Failure
		if errors.Is(err, ErrFenced) || errors.Is(err, ErrGuardMoved) || errors.As(err, &f) {
			return err
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// revisioned is a backend's batch that knows the revision it committed at
// (etcd's).
type revisioned interface{ Revision() int64 }

// Revision is where the batch left its guard: the revision it wrote
// at, or, for one whose answer was lost and that was settled as not
// applied, the settling write's; 0 where it moved no guard, and on
// Pebble, which has none.
func (b *Batch) Revision() int64 { return b.rev }

// Settle makes final a guarded commit whose answer was lost and that could
// not be settled then (persistence.ErrUnsettled), before its entity is read
// again. See kvBackend.Settle; on Pebble, nothing to settle.
func (s *Store) Settle(f Fence) (rev int64, landed bool, err error) {
	err = s.read(func(kv Backend) error {
		st, ok := kv.(interface {
			Settle(Fence) (int64, bool, error)
		})
		if !ok {
			return nil
		}
		var err error
		rev, landed, err = st.Settle(f)
		return err
	})
	return rev, landed, err
}

// Revision is key's revision as the backend keeps it, read linearizably:
// the guard a writer compares at its next commit. 0 for an absent
// key, and on Pebble, whose single writer needs no guard.
func (s *Store) Revision(key []byte) (int64, error) {
	var rev int64
	err := s.read(func(kv Backend) error {
		r, ok := kv.(interface{ Revision([]byte) (int64, error) })
		if !ok {
			return nil
		}
		var err error
		rev, err = r.Revision(key)
		return err
	})
	return rev, err
}

// Discard drops an uncommitted batch.
func (b *Batch) Discard() { b.w.Close() }

var _ io.Closer = (*Store)(nil)

// Flush writes the memtable to an sstable now (a backup's checkpoint, and
// the tests that need data in sstables).
func (s *Store) Flush() error {
	if err := s.health.writeRefusal(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	pb, ok := s.kv.(*pebbleBackend)
	if !ok {
		return nil
	}
	return pb.db.Flush()
}

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

// visibility holds a read back until every commit it may have seen is
// durable (S5, I15). Pebble shows a batch to readers once it is in the
// memtable, before its WAL sync returns: a read in that window could
// answer with a state that a crash, or a failed sync, then takes back.
//
// Every commit takes a ticket before it enters Pebble and gives it back
// when its sync has returned. A read, once it has read, waits until every
// ticket taken before it finished reading is given back: any batch it saw
// entered Pebble before that, so its ticket is among them. If the store
// seals meanwhile, the read is refused instead.
type visibility struct {
	health   *Health
	mu       sync.Mutex
	cond     sync.Cond
	next     uint64
	inflight []uint64 // tickets not given back, ascending
}

func newVisibility(h *Health) *visibility {
	v := &visibility{health: h}
	v.cond.L = &v.mu
	h.OnSeal(func(*Failure) {
		v.mu.Lock()
		v.cond.Broadcast()
		v.mu.Unlock()
	})
	return v
}

func (v *visibility) begin() uint64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	v.next++
	t := v.next
	v.inflight = append(v.inflight, t)
	v.mu.Unlock()
	return t
}

func (v *visibility) end(t uint64) {
	if v == nil {
		return
	}
	v.mu.Lock()
	for i, x := range v.inflight {
		if x == t {
			v.inflight = append(v.inflight[:i], v.inflight[i+1:]...)
			break
		}
	}
	if len(v.inflight) == 0 || v.inflight[0] > t {
		v.cond.Broadcast()
	}
	v.mu.Unlock()
}

// wait returns once every commit begun so far has ended, or the store's
// failure if it sealed first.
func (v *visibility) wait() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	upTo := v.next
	for len(v.inflight) > 0 && v.inflight[0] <= upTo {
		if f := v.health.Failed(); f != nil {
			return f
		}
		v.cond.Wait()
	}
	if f := v.health.Failed(); f != nil {
		return f
	}
	return nil
}
