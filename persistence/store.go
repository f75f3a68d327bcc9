// Package persistence is warden's durable record: a Store over one Backend,
// Pebble v2 on a single node (the default) or etcd in a cluster (C1).
//
// Every entity transition is written as one Batch, committed atomically and
// durably before any effect starts and before anyone is answered: on Pebble
// with pebble.Sync (fsync of the WAL; concurrent commits from many actors
// share WAL syncs through Pebble's commit pipeline, so a sync per
// transition does not mean an fsync per transition), on etcd as one
// transaction, committed by a quorum of members. In a cluster the
// transaction also compares the entity's shard key with the writer's epoch
// (C3), so a writer whose lease lapsed commits nothing.
//
// # Key layout
//
// Keys are ASCII, one prefix byte and a slash per record family, so that a
// family is one contiguous range:
//
//	m/<marquee id>                  marquee snapshot (MarqueeRecord)
//	h/<marquee id>/<seq %016x>      history entry; the newest HistoryLimit kept
//	d/<marquee id>/<delivery id>    webhook dedup record (DedupRecord, T5)
//	p/<pool>                        pool metadata (PoolMeta)
//	a/<pool>/<job>                  admission record (admission.Job)
//	e/<environment id>              environment record (EnvRecord)
//	b/<branch>                      the branch's last route generation
//	w/<unix nanos %016x>/<k>/<id>   wake index: the entity (k: m marquee,
//	                                e environment) has a deadline or unsettled
//	                                effects at that time (empty value)
//
// # Encoding
//
// Every value is one version byte followed by JSON. The version says how the
// rest is read; a value whose version or JSON does not decode, or that fails
// validation, is reported as Malformed with its key and reason, never
// skipped silently and never allowed to hide its neighbours (A8).
package persistence

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wardenhq/warden/actors/trust"

	"github.com/wardenhq/warden/actors/errs"
)

// ErrNotFound is returned for a key that holds nothing.
var ErrNotFound error = errs.NotFound

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
	// Sealer encrypts the secrets a record holds before they are written
	// (T10); nil keeps them in clear (in-memory stores of tests and the
	// simulator).
	Sealer *trust.Sealer
}

// Store is the durable record over one Backend: Pebble for a single node,
// etcd for a cluster (C1).
type Store struct {
	kv     Backend
	sealer *trust.Sealer
}

// Open opens (or creates) a Pebble store in dir: the single-node default.
func Open(dir string, o Options) (*Store, error) {
	kv, err := OpenPebble(dir, o)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, sealer: o.Sealer}, nil
}

// OpenBackend wraps any Backend (the etcd one in a cluster) as a Store.
func OpenBackend(kv Backend, sealer *trust.Sealer) *Store {
	return &Store{kv: kv, sealer: sealer}
}

// Close closes the backend. Closing twice is harmless.
func (s *Store) Close() error { return s.kv.Close() }

func (s *Store) get(key []byte, v any) error {
	return s.kv.Get(key, func(val []byte) error { return decode(key, val, v) })
}

// listPage is one page of a record family in key order, the paging,
// filtering and scan budget every list shares: up to limit records that
// keep accepts after the id `after`, reading at most maxScan records (0:
// no bound; spent, the page ends at the last record read), the id to go
// on after ("" at the end), and the records that did not decode.
func listPage[T any](s *Store, prefix, after string, limit, maxScan int, read func(k, v []byte) (T, error), keep func(T) bool) ([]T, string, []Malformed, error) {
	var out []T
	var bad []Malformed
	var start []byte
	if after != "" {
		start = append([]byte(prefix+after), 0)
	}
	next, lastRead, lastKept, scanned := "", "", "", 0
	err := s.scan([]byte(prefix), start, func(k, v []byte) (bool, error) {
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

// scan calls f for every key with the prefix, in key order, from start
// (inclusive; nil means the prefix start). f returns false to stop.
func (s *Store) scan(prefix, start []byte, f func(k, v []byte) (bool, error)) error {
	lower := prefix
	if start != nil {
		lower = start
	}
	return s.kv.Scan(lower, prefixEnd(prefix), f)
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

// has reports whether a key holds a value, without decoding it: enough for
// the registry to decide whether an entity exists before activating it
// (the actor decodes the record once, when it loads).
func (s *Store) has(key []byte) (bool, error) {
	err := s.kv.Get(key, func([]byte) error { return nil })
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// MarqueeExists reports whether a marquee record (or tombstone) is stored.
func (s *Store) MarqueeExists(id string) (bool, error) { return s.has(marqueeKey(id)) }

// EnvExists reports whether an environment record (or tombstone) is stored.
func (s *Store) EnvExists(id string) (bool, error) { return s.has(envKey(id)) }

// ForEach calls f with every key and value in the store, in key order:
// a raw view for tests that prove a refusal wrote nothing (T12) and for
// debugging. The value is only valid during the call.
func (s *Store) ForEach(f func(k, v []byte) error) error {
	return s.scan(nil, nil, func(k, v []byte) (bool, error) { return true, f(k, v) })
}

// Batch collects one transition's writes; Commit makes them durable
// together.
type Batch struct {
	s     *Store
	w     Writes
	fence Fence
}

// NewBatch starts a transition.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, w: s.kv.NewWrites()} }

// Fence makes the commit conditional on the writer still owning the
// entity's shard at its epoch (C3); a batch without one is a single node's.
func (b *Batch) Fence(f Fence) { b.fence = f }

// PutRaw writes bytes as they are. Tests use it to plant malformed records.
func (b *Batch) PutRaw(key string, val []byte) { b.w.Set([]byte(key), val) }

// Len is the number of writes staged.
func (b *Batch) Len() int { return b.w.Len() }

// Commit makes the batch durable: synced before it returns, or not written
// at all. A fenced batch whose fence no longer holds fails with ErrFenced.
func (b *Batch) Commit() error {
	defer b.w.Close()
	if err := b.w.Commit(b.fence); err != nil {
		if errors.Is(err, ErrFenced) {
			return err
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Discard drops an uncommitted batch.
func (b *Batch) Discard() { b.w.Close() }

var _ io.Closer = (*Store)(nil)
