package persistence

import (
	"errors"
	"fmt"
)

// The store's format: one record, v/format, says which layout of
// records the store holds and which warden last opened it for writing.
// A build reads every format up to its own and refuses a newer one by name,
// so that a downgrade never half-reads records it does not know.

// StoreFormat is the record layout this build writes and the newest it
// reads. Format 4 is the layout in the package doc: an entity's deliveries
// are kept in chunks (r/<entity>#<slot>), the newest of which a marquee's
// or an environment's own record keeps (its "deliveries" field), so a
// delivery writes a slot only when its chunk fills. Format 3 wrote the
// newest chunk to its slot with every delivery; format 2 kept the
// deliveries as one record (r/<entity>), rewritten whole; format 1 kept a
// record per delivery (d/), and a store written before the format record
// existed is format 1. Older stores open in place: a format-3 slot is read
// until the entity's record keeps that chunk; a format-2 record is read
// and written again as chunks at the entity's next delivery; d/ records
// are read until their retention ends. A build of format 3 would not read
// the chunk in the record, and would answer a repeat of its deliveries as
// new, so it refuses format 4. Raise it when a record changes in a way an
// older build would misread, and say in docs/guides/backups.md which formats upgrade
// in place.
const StoreFormat = 4

// formatKey is the format record's key: a family of its own ("v/").
const (
	FormatFamily = "v/"
	formatKey    = FormatFamily + "format"
)

// FormatRecord is what v/format holds.
type FormatRecord struct {
	Format int `json:"format"`
	// WrittenBy is the version of the last warden that opened the store
	// for writing (buildinfo's Version and commit).
	WrittenBy string `json:"written_by"`
}

// NewerFormatError is a store this build cannot read: written by a newer
// warden.
type NewerFormatError struct {
	Stored FormatRecord
	// This is the version of the warden that refused it.
	This string
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("the store is format %d, written by warden %s; this warden (%s) reads formats up to %d: "+
		"run the newer warden again, or restore a backup taken before the upgrade (docs/guides/backups.md)",
		e.Stored.Format, e.Stored.WrittenBy, e.This, StoreFormat)
}

// Format reads the store's format record; a store without one (written
// before it existed, or empty) is format StoreFormat with WrittenBy "".
func (s *Store) Format() (FormatRecord, error) {
	var f FormatRecord
	err := s.Get([]byte(formatKey), &f)
	if errors.Is(err, ErrNotFound) {
		return FormatRecord{Format: StoreFormat}, nil
	}
	return f, err
}

// CheckFormat refuses a store newer than this build (this names the build
// in the refusal) and otherwise records that this build writes it: a
// single node's start. A read-only store is only checked.
func (s *Store) CheckFormat(this string) error {
	f, err := s.RefuseNewer(this)
	if err != nil {
		return err
	}
	if f.WrittenBy == this && f.Format == StoreFormat || s.health.writeRefusal() != nil {
		return nil
	}
	return s.StampFormat(this, Fence{})
}

// RefuseNewer reads the format record and refuses a store newer than this
// build. A cluster node checks at start with it and stamps the record
// only once it owns the shard the record is written under (StampFormat
// with that shard's fence, C3).
func (s *Store) RefuseNewer(this string) (FormatRecord, error) {
	f, err := s.Format()
	if err != nil {
		return f, fmt.Errorf("store format: %w", err)
	}
	if f.Format > StoreFormat {
		return f, &NewerFormatError{Stored: f, This: this}
	}
	return f, nil
}

// StampFormat records that this build writes the store, under fence (zero
// on a single node).
func (s *Store) StampFormat(this string, fence Fence) error {
	b := s.NewBatch()
	b.Fence(fence)
	b.Put([]byte(formatKey), FormatRecord{Format: StoreFormat, WrittenBy: this})
	if err := b.Commit(); err != nil {
		return fmt.Errorf("store format: %w", err)
	}
	return nil
}

// PutFormat stages a format record: for a restore or a migration writing
// the source's record as it was, and for tests planting a newer store.
func (b *Batch) PutFormat(f FormatRecord) { b.Put([]byte(formatKey), f) }
