package persistence

import (
	"errors"
	"fmt"
	"slices"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/trust"
)

// Sealing at rest (T10): the secrets a marquee record holds (the SSH
// private key and the acme-dns credentials) are encrypted before the
// record is encoded, with the record's key and the field's name as
// associated data; everything else stays readable for `warden debug` and
// leak audits. A record written before sealing loads as it is and is
// sealed when it is next written, or by Reseal.

// secretFields lists each sealed field of a connection: its name in the
// associated data and where it lives.
func secretFields(c *marquee.Connection) []struct {
	name string
	v    *string
} {
	return []struct {
		name string
		v    *string
	}{{"ssh_private_key", &c.SSHPrivateKey}, {"acme_dns.username", &c.ACMEDNS.Username}, {"acme_dns.password", &c.ACMEDNS.Password}}
}

// sealMarquee returns a copy of r whose secrets are sealed.
func (s *Store) sealMarquee(r MarqueeRecord) MarqueeRecord {
	if s.sealer == nil || r.State.Connection == nil {
		return r
	}
	c := *r.State.Connection
	key := string(marqueeKey(r.State.ID))
	for _, f := range secretFields(&c) {
		*f.v = s.sealer.Seal(*f.v, key, f.name)
	}
	r.State.Connection = &c
	return r
}

// openMarquee opens a decoded record's secrets and validates it (A9): a
// record that does not open is malformed, never used.
func (s *Store) openMarquee(key []byte, r *MarqueeRecord) error {
	if c := r.State.Connection; c != nil {
		for _, f := range secretFields(c) {
			v, err := s.sealer.Open(*f.v, string(key), f.name)
			if err != nil {
				return &CorruptError{Malformed{Key: string(key), Reason: err.Error()}}
			}
			*f.v = v
		}
	}
	if err := r.State.Validate(); err != nil {
		return &CorruptError{Malformed{Key: string(key), Reason: err.Error()}}
	}
	return nil
}

// sealedUnder reports the key ids a stored marquee value names ("" for a
// secret in clear).
func sealedUnder(r MarqueeRecord) []string {
	c := r.State.Connection
	if c == nil {
		return nil
	}
	var ids []string
	for _, f := range secretFields(c) {
		if *f.v != "" {
			ids = append(ids, trust.SealedKeyID(*f.v))
		}
	}
	return ids
}

// resealBatch bounds one batch of Reseal: a crash loses at most this much
// progress, and a batch stays small in memory.
const resealBatch = maxBulkWrites

// Reseal rewrites every marquee record whose secrets are not sealed under
// the active key (in clear, or under an older key), in synced batches
// (`warden rekey`, T10). It is safe to run again after a crash: a record
// already under the active key is left alone. It returns how many records
// it rewrote; afterwards no record names any other key.
func (s *Store) Reseal() (rewritten int, err error) {
	if s.sealer == nil {
		return 0, errors.New("reseal: no seal key")
	}
	active := s.sealer.ActiveKeyID()
	var pending []MarqueeRecord
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		b := s.NewBatch()
		for _, r := range pending {
			b.w.Set(marqueeKey(r.State.ID), encode(s.sealMarquee(r)))
		}
		if err := b.Commit(); err != nil {
			return err
		}
		rewritten += len(pending)
		pending = pending[:0]
		return nil
	}
	err = s.scan([]byte("m/"), nil, func(k, v []byte) (bool, error) {
		var raw MarqueeRecord
		if err := decode(k, v, &raw); err != nil {
			return true, nil // malformed records are reported elsewhere (A8); nothing to reseal
		}
		if !slices.ContainsFunc(sealedUnder(raw), func(id string) bool { return id != active }) {
			return true, nil
		}
		if err := s.openMarquee(k, &raw); err != nil {
			return false, fmt.Errorf("reseal %s: %w", k, err)
		}
		pending = append(pending, raw)
		if len(pending) >= resealBatch {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		err = flush()
	}
	return rewritten, err
}
