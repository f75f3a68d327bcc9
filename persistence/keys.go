package persistence

import (
	"fmt"
	"time"
)

// The key layout (see the package doc): one prefix a record family, so a
// family is one contiguous range.

func marqueeKey(id string) []byte { return []byte("m/" + id) }

func historyKey(id string, seq uint64) []byte {
	return fmt.Appendf(nil, "h/%s/%016x", id, seq)
}

func dedupKey(marqueeID, deliveryID string) []byte {
	return []byte("d/" + marqueeID + "/" + deliveryID)
}

func poolKey(name string) []byte { return []byte("p/" + name) }

func admissionKey(pool, job string) []byte { return []byte("a/" + pool + "/" + job) }

func admissionPrefix(pool string) []byte { return []byte("a/" + pool + "/") }

func wakeKey(at time.Time, id string) []byte { return wakeKeyOf(at, KindMarquee, id) }

func wakeKeyOf(at time.Time, kind, id string) []byte {
	return fmt.Appendf(nil, "w/%016x/%s/%s", uint64(at.UnixNano()), kind, id)
}

func envKey(id string) []byte { return []byte("e/" + id) }

func branchKey(branch string) []byte { return []byte("b/" + branch) }

// Entity kinds in the wake index.
const (
	KindMarquee     = "m"
	KindEnvironment = "e"
)

// benchFloorKey is the benchmark floor's n-th write (httpapi's
// --bench-noop route): a family of its own that no reader scans.
func benchFloorKey(n uint64) []byte { return fmt.Appendf(nil, "x/floor/%016x", n) }

// dataLossKey is the audit entry of a repair that dropped data (S7).
func dataLossKey(at time.Time) []byte {
	return fmt.Appendf(nil, "z/data-loss/%016x", uint64(at.UnixNano()))
}
