// Package benchfloor is the durable path's floors that `make bench`
// measures warden against (served only with --bench-noop): the request's
// body written into the server's own store in one synced batch, under a
// key no reader scans, and the records floor, the keys one durable
// callback writes in one synced batch; no authentication, no decoding, no
// actor, no decision. It lives apart so that the production API (the
// System, the store) carries no benchmark-only call.
package benchfloor

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/wardenhq/warden/persistence"
)

// Prefix is the floor's key family (x/floor/<n %016x>): apart from every
// record family, so that nothing warden reads ever meets a floor write.
const Prefix = "x/floor/"

// Floor writes bodies under consecutive keys of its own family.
type Floor struct {
	store   *persistence.Store
	seq     atomic.Uint64
	records atomic.Uint64
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

// The records floor writes what one durable callback to a marquee in
// steady state writes, and nothing else: the marquee's record rewritten
// (with the newest chunk of its deliveries, store format 4), a history
// entry added and, once in HistoryTrimEvery, the entries past the window
// deleted as one range, once in
// ChunkEvery callbacks the full chunk of deliveries (and, as in every
// commit, the store's sequence). Against the floor it measures what a callback's keys cost the
// store; against the durable path, what the rest costs: authentication,
// decoding, the actor, the decision and the encoding.
//
// Its values have the sizes make bench's callbacks write
// (TestRecordsFloorHasACallbacksShape holds them to the real records),
// filled with hex digits, which Pebble's block compression cannot shrink
// as it shrinks the records' JSON: the floor may cost more than the
// records, never less. Slots stand for make bench's marquees, one per
// connection at 64 connections.
const (
	Slots         = 64
	HistoryWindow = 200 // actors/record.HistoryLimit
	// HistoryTrimEvery is actors/record.HistoryTrimEvery: the entries past
	// the window are deleted as one range this often.
	HistoryTrimEvery = 64
	MarqueeBytes     = 880 // the mean over a chunk's cycle, its chunk included
	HistoryBytes     = 261
	DeliveriesBytes  = 335 // a full chunk (its answers carry their reasons, O16)
	ChunkEvery       = 8   // persistence.ChunkLen
)

// RecordsPrefix is the records floor's key family.
const RecordsPrefix = "x/floor-records/"

var marqueeValue, historyValue, deliveriesValue = hexFill(MarqueeBytes), hexFill(HistoryBytes), hexFill(DeliveriesBytes)

// The slots' fixed keys, made once: the floor should cost what the store
// costs, not its own formatting (the records' keys are made without fmt).
var marqueeKeys, deliveriesKeys = slotKeys('m'), slotKeys('r')

func slotKeys(family byte) [Slots][]byte {
	var keys [Slots][]byte
	for slot := range keys {
		keys[slot] = RecordsKey(family, uint64(slot))
	}
	return keys
}

func hexFill(n int) []byte {
	const digits = "0123456789abcdef"
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(len(digits))]
	}
	return b
}

// WriteRecords commits the records floor's next callback, synced like a
// transition's batch; the body is not written (a callback's records are
// what the decision makes of it).
func (f *Floor) WriteRecords([]byte) error {
	n := f.records.Add(1) - 1
	slot, seq := n%Slots, n/Slots
	b := f.store.NewBatch()
	b.Set(marqueeKeys[slot], marqueeValue)
	b.Set(RecordsHistoryKey(slot, seq), historyValue)
	if seq+1 > HistoryWindow && (seq+1)%HistoryTrimEvery == 0 {
		b.DeleteRange(RecordsHistoryKey(slot, 0), RecordsHistoryKey(slot, seq+1-HistoryWindow))
	}
	if seq%ChunkEvery == ChunkEvery-1 {
		b.Set(deliveriesKeys[slot], deliveriesValue)
	}
	return b.Commit()
}

// RecordsKey is a slot's record of a family: m the marquee's, r its
// deliveries.
func RecordsKey(family byte, slot uint64) []byte {
	return fmt.Appendf(nil, "%s%c/%03d", RecordsPrefix, family, slot)
}

// RecordsHistoryKey is a slot's seq-th history entry.
func RecordsHistoryKey(slot, seq uint64) []byte {
	return fmt.Appendf(nil, "%sh/%03d/%016x", RecordsPrefix, slot, seq)
}
