// Package benchfloor is the durable path's floor that `make bench` measures
// warden against (served only with --bench-noop): the request's body
// written into the server's own store in one synced batch, under a key no
// reader scans; no authentication, no decoding, no actor, no decision. It
// lives apart so that the production API (the System, the store) carries
// no benchmark-only call.
package benchfloor

import (
	"fmt"
	"sync/atomic"

	"github.com/wardenhq/warden/persistence"
)

// Prefix is the floor's key family (x/floor/<n %016x>): apart from every
// record family, so that nothing warden reads ever meets a floor write.
const Prefix = "x/floor/"

// Floor writes bodies under consecutive keys of its own family.
type Floor struct {
	store *persistence.Store
	seq   atomic.Uint64
}

// New is a floor writing into store.
func New(store *persistence.Store) *Floor { return &Floor{store: store} }

// Write commits body under the next floor key, synced like a transition's
// batch.
func (f *Floor) Write(body []byte) error {
	b := f.store.NewBatch()
	b.Set(Key(f.seq.Add(1)), body)
	return b.Commit()
}

// Key is the floor's n-th key.
func Key(n uint64) []byte { return fmt.Appendf(nil, "%s%016x", Prefix, n) }
