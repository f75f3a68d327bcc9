package persistence

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
	Set(key, val []byte)
	Delete(key []byte)
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
}

// IsZero reports an unfenced (single-node) write.
func (f Fence) IsZero() bool { return f.Key == "" }

// ErrFenced: the writer no longer owns the shard at its epoch; nothing was
// written.
var ErrFenced = errors.New("fenced: this node no longer owns the shard at its epoch")

// pebbleBackend is the single-node Backend.
type pebbleBackend struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions
	closeOnce sync.Once
	closeErr  error
}

// CacheSize is Pebble's block cache: snapshots of active marquees, recent
// history and the filters stay in memory; 64 MiB is small for a 24 GiB host
// and large for the working set of thousands of active marquees.
const CacheSize = 64 << 20

type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(string, ...any) {}

func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// OpenPebble opens (or creates) the Pebble backend in dir.
func OpenPebble(dir string, o Options) (Backend, error) {
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
	return &pebbleBackend{db: db, writeOpts: wo}, nil
}

func (p *pebbleBackend) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.db.Close() })
	return p.closeErr
}

func (p *pebbleBackend) Get(key []byte, f func([]byte) error) error {
	val, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer closer.Close()
	return f(val)
}

func (p *pebbleBackend) Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
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
// promise it does not keep.
func (w *pebbleWrites) Commit(f Fence) error {
	if !f.IsZero() {
		return errors.New("the Pebble backend is single-node and cannot check a cluster fence")
	}
	return w.b.Commit(w.p.writeOpts)
}

func (w *pebbleWrites) Close() { _ = w.b.Close() }
