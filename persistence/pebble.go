package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleBackend is the single-node Backend.
type pebbleBackend struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions
	health    *Health
	readOnly  bool
	closeOnce sync.Once
	closeErr  error
}

// CacheSize is Pebble's block cache: snapshots of active marquees, recent
// history and the filters stay in memory; 64 MiB is small for a 24 GiB host
// and large for the working set of thousands of active marquees.
const CacheSize = 64 << 20

// FormatVersion is the on-disk format every store is opened at, and an
// older one ratcheted to (S6): the newest the pinned Pebble supports. It
// is at least FormatWALSyncChunks, whose WAL records carry their sync
// offsets, so that replay tells a torn tail (tolerated: nothing after it
// was ever acknowledged) from damage in the middle (refused, S7).
const FormatVersion = pebble.FormatNewest

// The build fails (a negative constant) if the pinned Pebble's newest
// format were older than WAL sync chunks.
const _ = uint(FormatVersion - pebble.FormatWALSyncChunks)

// openPebble opens the database in dir, read-write or read-only. A Fatalf
// from Pebble while it opens (a replay that cannot write its manifest)
// seals h and is returned instead of waiting for an Open that will never
// return.
func openPebble(dir string, o Options, h *Health, readOnly bool) (*pebbleBackend, error) {
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	before, _ := pebble.Peek(dir, fs)
	if err := checkNewestWAL(dir, fs); err != nil {
		return nil, err
	}
	po := &pebble.Options{
		FS:                 allOrNothingWAL{FS: fs},
		FormatMajorVersion: FormatVersion,
		ReadOnly:           readOnly,
		Logger:             newPebbleLogger(o.Logger, h, o.OnFatal),
		EventListener:      eventListener(o.Logger, h),
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
	type opened struct {
		db  *pebble.DB
		err error
	}
	done := make(chan opened, 1)
	go func() {
		db, err := pebble.Open(dir, po)
		done <- opened{db, err}
	}()
	var r opened
	select {
	case r = <-done:
	case <-h.Sealed():
		return nil, h.Failed()
	}
	if r.err != nil {
		return nil, openFailure(dir, fs, r.err)
	}
	if before != nil && before.Exists && before.FormatMajorVersion < r.db.FormatMajorVersion() {
		logger(o.Logger).Info("store format ratcheted", "data", dir,
			"from", before.FormatMajorVersion.String(), "to", r.db.FormatMajorVersion().String())
	}
	if !readOnly && (before == nil || !before.Exists || before.FormatMajorVersion < pebble.FormatWALSyncChunks) {
		// Pebble wrote the log it opened before it ratcheted the format,
		// so that log has no sync offsets; a flush starts a new one that
		// has (S6).
		if err := r.db.Flush(); err != nil {
			_ = r.db.Close()
			return nil, openFailure(dir, fs, err)
		}
	}
	wo := pebble.Sync
	if o.NoSync {
		wo = pebble.NoSync
	}
	return &pebbleBackend{db: r.db, writeOpts: wo, health: h, readOnly: readOnly}, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Close closes the database, unless the store is sealed: a sealed Pebble
// may hold its commit pipeline's locks in a goroutine that will never
// return (S1), and a Close would wait for it forever (S3).
func (p *pebbleBackend) Close() error {
	if f := p.health.Failed(); f != nil {
		return fmt.Errorf("not closed: %w", f)
	}
	p.closeOnce.Do(func() { p.closeErr = p.db.Close() })
	return p.closeErr
}

func (p *pebbleBackend) Get(key []byte, f func([]byte) error) error { return get(p.db, key, f) }

func (p *pebbleBackend) Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	return scan(p.db, lower, upper, f)
}

// get and scan read a Pebble database or a snapshot of it (View).
func get(r pebble.Reader, key []byte, f func([]byte) error) error {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return readFailure(key, err)
	}
	defer closer.Close()
	return f(val)
}

func scan(r pebble.Reader, lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return readFailure(lower, err)
	}
	return iterate(it, lower, f)
}

// iterate walks an iterator to its end, or until f stops it, and closes it.
func iterate(it *pebble.Iterator, lower []byte, f func(k, v []byte) (bool, error)) error {
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
		return readFailure(lower, err)
	}
	return it.Close()
}

// readFailure names a read that Pebble refused: a checksum that failed is
// corruption of that key's sstable (S7), anything else an I/O problem.
func readFailure(key []byte, err error) error {
	op := fmt.Sprintf("read %q", key)
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		op += " from " + info.Path
	}
	return &Failure{Cause: Classify(err), Op: op, Err: err}
}

func (p *pebbleBackend) NewWrites() Writes { return &pebbleWrites{p: p, b: p.db.NewBatch()} }

type pebbleWrites struct {
	p *pebbleBackend
	b *pebble.Batch
	n int
}

func (w *pebbleWrites) Set(k, v []byte) { _ = w.b.Set(k, v, nil); w.n++ }

func (w *pebbleWrites) Delete(k []byte) { _ = w.b.Delete(k, nil); w.n++ }

func (w *pebbleWrites) Len() int { return w.n }

// Commit refuses a fence: one Pebble database has one writer, the process
// holding its directory lock, and a fence it cannot check would be a
// promise it does not keep. A failed WAL write or sync never returns here:
// Pebble reports it through its logger's Fatalf, which seals the store.
func (w *pebbleWrites) Commit(f Fence) error {
	if !f.IsZero() {
		return errors.New("the Pebble backend is single-node and cannot check a cluster fence")
	}
	if w.p.readOnly {
		return w.p.health.writeRefusal()
	}
	return w.b.Commit(w.p.writeOpts)
}

func (w *pebbleWrites) Close() { _ = w.b.Close() }
