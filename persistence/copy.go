package persistence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
)

// Whole-store views and copies (D4-D7): a point-in-time read-only view for
// a live check, Pebble's checkpoint and etcd's snapshot for a backup, and
// a raw copy of every record from one backend to another for a migration.

// ErrReadOnlyView is a write to a point-in-time view.
var ErrReadOnlyView = errors.New("a point-in-time view of the store takes no writes")

// View returns a read-only Store of the records as they are now, however
// the store moves on while it is read: a Pebble snapshot, or on etcd the
// current revision. Close releases it.
func (s *Store) View() (*Store, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.vis.wait(); err != nil {
		return nil, err
	}
	var kv Backend
	switch b := s.kv.(type) {
	case *pebbleBackend:
		kv = &pebbleView{snap: b.db.NewSnapshot()}
	case interface{ snapshot() (Backend, error) }:
		snap, err := b.snapshot()
		if err != nil {
			return nil, err
		}
		kv = snap
	default:
		return nil, fmt.Errorf("store view: backend %T", s.kv)
	}
	return &Store{kv: kv, health: newHealth(nil)}, nil
}

// pebbleView is a Pebble snapshot as a Backend.
type pebbleView struct{ snap *pebble.Snapshot }

func (v *pebbleView) Get(key []byte, f func([]byte) error) error { return get(v.snap, key, f) }

func (v *pebbleView) Scan(lower, upper []byte, f func(k, val []byte) (bool, error)) error {
	return scan(v.snap, lower, upper, false, f)
}

func (v *pebbleView) NewWrites() Writes { return refusedWrites{} }
func (v *pebbleView) Close() error      { return v.snap.Close() }

type refusedWrites struct{}

func (refusedWrites) Set(k, v []byte)         {}
func (refusedWrites) Delete(k []byte)         {}
func (refusedWrites) DeleteRange(_, _ []byte) {}
func (refusedWrites) Len() int                { return 0 }
func (refusedWrites) Commit(Fence) error      { return ErrReadOnlyView }
func (refusedWrites) Close()                  {}

// OpenReadOnly opens a Pebble store that is not serving for reading only
// (warden verify, a backup being checked): nothing in it is changed, a
// damaged WAL is refused, not repaired.
func OpenReadOnly(dir string, log *slog.Logger) (*Store, error) {
	h := newHealth(log)
	kv, err := openChecked(dir, Options{Logger: log}, h, true, false)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, health: h, dir: dir}, nil
}

// Checkpoint writes a consistent copy of a Pebble store into dir (which
// must not exist) while it keeps serving: its sstables hard-linked where
// the filesystem allows, its WAL flushed into it (D4).
func (s *Store) Checkpoint(dir string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	pb, ok := s.kv.(*pebbleBackend)
	if !ok {
		return errors.New("checkpoint: the store is not Pebble (a cluster is backed up by an etcd snapshot)")
	}
	if err := pb.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("checkpoint into %s: %w", dir, err)
	}
	return nil
}

// EtcdSnapshot streams etcd's own snapshot of its whole key space through
// the client's maintenance API: what `etcdctl snapshot save` writes.
func (s *Store) EtcdSnapshot(ctx context.Context) (io.ReadCloser, error) {
	e, ok := s.kv.(*etcdBackend)
	if !ok {
		return nil, errors.New("etcd snapshot: the store is not etcd")
	}
	return e.c.Snapshot(ctx)
}

// IsEtcd reports whether the store is a cluster's.
func (s *Store) IsEtcd() bool {
	_, ok := s.kv.(*etcdBackend)
	return ok
}

// Empty reports whether the store holds no record at all.
func (s *Store) Empty() (bool, error) {
	empty := true
	err := s.Scan(nil, nil, func(k, v []byte) (bool, error) { empty = Internal(k); return empty, nil })
	return empty, err
}

// CopyAll copies every record of from into to, raw, in batches of at most
// maxBulkWrites (etcd's bound on one transaction), and returns how many.
// The caller makes sure nothing writes either store meanwhile (D7).
func CopyAll(from, to *Store) (int, error) {
	n := 0
	b := to.NewBatch()
	err := from.Scan(nil, nil, func(k, v []byte) (bool, error) {
		if Internal(k) {
			return true, nil // the target keeps its own
		}
		b.Set(append([]byte(nil), k...), append([]byte(nil), v...))
		n++
		if b.Len() >= maxBulkWrites {
			if err := b.Commit(); err != nil {
				return false, err
			}
			b = to.NewBatch()
		}
		return true, nil
	})
	if err != nil {
		b.Discard()
		return 0, err
	}
	if b.Len() == 0 {
		b.Discard()
		return n, nil
	}
	return n, b.Commit()
}
