// Package persistence is warden's durable record: a Store over Pebble v2.
//
// Every entity transition is written as one Batch committed with
// pebble.Sync (fsync of the WAL) before any effect starts and before anyone
// is answered. Concurrent commits from many actors share WAL syncs through
// Pebble's commit pipeline (group commit), so a sync per transition does not
// mean an fsync per transition.
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
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/wardenhq/warden/actors/trust"

	"github.com/wardenhq/warden/actors/errs"
)

// CacheSize is Pebble's block cache: snapshots of active marquees, recent
// history and the filters stay in memory; 64 MiB is small for a 24 GiB host
// and large for the working set of thousands of active marquees.
const CacheSize = 64 << 20

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

// Store is the durable record over one Pebble database.
type Store struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions
	sealer    *trust.Sealer
	closeOnce sync.Once
	closeErr  error
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(string, ...any) {}

func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// Open opens (or creates) the store in dir.
func Open(dir string, o Options) (*Store, error) {
	po := &pebble.Options{
		Logger: quietLogger{},
		// Every callback with a Webhook-Id looks its delivery up, and almost
		// every lookup misses: bloom filters answer a miss from memory
		// instead of reading a block of every level.
		CacheSize: CacheSize,
		// A history entry is deleted HistoryLimit transitions after it is
		// written; a memtable this size usually holds both, so neither ever
		// reaches an sstable or a compaction.
		MemTableSize: 64 << 20,
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if o.FS != nil {
		po.FS = o.FS
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	wo := pebble.Sync
	if o.NoSync {
		wo = pebble.NoSync
	}
	return &Store{db: db, writeOpts: wo, sealer: o.Sealer}, nil
}

// Close flushes and closes the database. Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}

func (s *Store) get(key []byte, v any) error {
	val, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer closer.Close()
	return decode(key, val, v)
}

// scan calls f for every key with the prefix, in key order, from start
// (inclusive; nil means the prefix start). f returns false to stop.
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

func (s *Store) scan(prefix, start []byte, f func(k, v []byte) (bool, error)) error {
	lower := prefix
	if start != nil {
		lower = start
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		more, err := f(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return err
	}
	return it.Close()
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
	_, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	return true, closer.Close()
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
	s *Store
	b *pebble.Batch
}

// NewBatch starts a transition.
func (s *Store) NewBatch() *Batch { return &Batch{s: s, b: s.db.NewBatch()} }

// PutRaw writes bytes as they are. Tests use it to plant malformed records.
func (b *Batch) PutRaw(key string, val []byte) { _ = b.b.Set([]byte(key), val, nil) }

// Commit makes the batch durable (fsync unless the store is NoSync).
func (b *Batch) Commit() error {
	defer b.b.Close()
	if err := b.b.Commit(b.s.writeOpts); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Discard drops an uncommitted batch.
func (b *Batch) Discard() { _ = b.b.Close() }

var _ io.Closer = (*Store)(nil)
