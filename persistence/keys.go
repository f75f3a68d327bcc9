package persistence

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// The key layout (see the package doc), spelled here and nowhere else: one
// prefix a record family, so a family is one contiguous range. The store
// knows the families' names, not their records: each kind's codec lives
// with the kind (actors).

// Family prefixes.
const (
	MarqueePrefix       = "m/"
	HistoryFamily       = "h/"
	DedupFamily         = "d/"
	DeliveriesFamily    = "r/"
	PoolPrefix          = "p/"
	AdmissionFamily     = "a/"
	EnvPrefix           = "e/"
	BranchFamily        = "b/"
	WakePrefix          = "w/"
	GuardFamily         = "g/"
	dataLossPrefix      = "z/data-loss/"
	generationKeyDigits = 16
)

// MarqueeKey is a marquee's snapshot.
func MarqueeKey(id string) []byte { return []byte(MarqueePrefix + id) }

// HistoryPrefix is a marquee's history; HistoryKey its seq-th entry.
func HistoryPrefix(id string) []byte { return []byte(HistoryFamily + id + "/") }

func HistoryKey(id string, seq uint64) []byte {
	b := make([]byte, 0, len(HistoryFamily)+len(id)+1+16)
	b = append(append(append(b, HistoryFamily...), id...), '/')
	return appendHex16(b, seq) // by hand: fmt was two allocations of every step
}

// appendHex16 appends n as 16 lower-case hex digits ("%016x").
func appendHex16(b []byte, n uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[n>>uint(shift)&0xF])
	}
	return b
}

// DedupPrefix is an entity's delivery records; DedupKey one of them (T5).
func DedupPrefix(entity string) []byte { return []byte(DedupFamily + entity + "/") }

func DedupKey(entity, deliveryID string) []byte {
	return []byte(DedupFamily + entity + "/" + deliveryID)
}

// PoolKey is a pool's metadata.
func PoolKey(name string) []byte { return []byte(PoolPrefix + name) }

// AdmissionPrefix is a pool's job records; AdmissionKey one of them.
func AdmissionPrefix(pool string) []byte { return []byte(AdmissionFamily + pool + "/") }

func AdmissionKey(pool, job string) []byte { return []byte(AdmissionFamily + pool + "/" + job) }

// EnvKey is an environment's record.
func EnvKey(id string) []byte { return []byte(EnvPrefix + id) }

// LegacyBranchKey held a branch's last route generation before each
// generation had a key of its own (read, never written).
func LegacyBranchKey(branch string) []byte { return []byte(BranchFamily + branch) }

// BranchGenerationPrefix is a branch's route generations; each given out
// has a key, so that two creates of one branch committing in either order
// leave the newest readable (the last key).
func BranchGenerationPrefix(branch string) []byte { return []byte(BranchFamily + branch + "/") }

func BranchGenerationKey(branch string, g uint64) []byte {
	return fmt.Appendf(nil, "%s%s/%0*x", BranchFamily, branch, generationKeyDigits, g)
}

// ParseBranchGeneration reads the generation a BranchGenerationKey names.
func ParseBranchGeneration(prefix, key []byte) (uint64, bool) {
	if !bytes.HasPrefix(key, prefix) {
		return 0, false
	}
	rest := key[len(prefix):]
	if len(rest) != generationKeyDigits {
		return 0, false
	}
	g, err := strconv.ParseUint(string(rest), 16, 64)
	return g, err == nil
}

// GuardKey is a cluster entity's guard: its mod revision is the
// revision of the entity's last commit, which the next commit compares.
// Its value names the commit that wrote it, so that a read-back can tell
// that commit from another. A single node writes none.
func GuardKey(kind, id string) string { return GuardFamily + kind + "/" + id }

// Entity kinds in the wake index.
const (
	WakeMarquee     = "m"
	WakeEnvironment = "e"
)

// WakeKey is an entity's wake-index entry at a time.
func WakeKey(at time.Time, kind, id string) []byte {
	return fmt.Appendf(nil, "%s%016x/%s/%s", WakePrefix, uint64(at.UnixNano()), kind, id)
}

// dataLossKey is the audit entry of a repair that dropped data.
func dataLossKey(at time.Time) []byte {
	return fmt.Appendf(nil, "%s%016x", dataLossPrefix, uint64(at.UnixNano()))
}
