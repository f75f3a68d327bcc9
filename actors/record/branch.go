package record

import (
	"errors"
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/persistence"
)

// Branch is a branch's durable record: one key per generation given
// out (b/<branch>/<n>, holding the preview it went to), the last
// environment.RecentGivings of them kept, older ones deleted.
type Branch struct{ Branch environment.Branch }

// BranchWrites is what a branch's step writes.
type BranchWrites struct{}

// A branch has no deadline in the wake index and keeps no deliveries.
func (BranchWrites) WakeLetter() string                             { return "" }
func (BranchWrites) WakeOf(Branch) time.Time                        { return time.Time{} }
func (BranchWrites) RecentDeliveries(Branch) persistence.InRecord   { return persistence.InRecord{} }
func (BranchWrites) WithRecentDeliveries(r Branch, _ []byte) Branch { return r }

// Stage writes the new giving's key; the one that fell out of the recent
// givings goes.
func (BranchWrites) Stage(b persistence.Writer, name string, _, _ Branch, out environment.BranchOutcome) {
	for _, g := range out.Records {
		b.Set(persistence.BranchGenerationKey(name, g.Generation), []byte(g.Env))
		if g.Generation > environment.RecentGivings {
			b.Delete(persistence.BranchGenerationKey(name, g.Generation-environment.RecentGivings))
		}
	}
}

// BranchGeneration reads the newest route generation a branch gave out:
// the last of its keys, or the one key of the layout before them.
func BranchGeneration(st *persistence.Store, branch string) (uint64, error) {
	var last uint64
	prefix := persistence.BranchGenerationPrefix(branch)
	// Generation keys are fixed-width hex, so the last that parses is the
	// newest; a key under the prefix that does not parse is a longer
	// branch name's ("main/x" under "main"), passed over.
	err := st.ScanReverse(prefix, func(k, _ []byte) (bool, error) {
		g, ok := persistence.ParseBranchGeneration(prefix, k)
		last = g
		return !ok, nil
	})
	if err != nil {
		return 0, err
	}
	return withLegacy(st, branch, last)
}

// LoadBranch reads a branch's givings in generation order (its keys sort
// so), and the last generation of the layout before they had keys.
func LoadBranch(st *persistence.Store, branch string) (environment.Branch, error) {
	b := environment.Branch{Name: branch}
	last, err := scanBranch(st, branch, func(g uint64, env []byte) {
		if len(env) > 0 {
			b.Recent = append(b.Recent, environment.Give{Env: string(env), Generation: g})
		}
	})
	b.Last = last
	b.Recent = b.Recent[max(0, len(b.Recent)-environment.RecentGivings):]
	return b, err
}

// scanBranch calls give (if not nil) with each generation key of a
// branch and the environment it went to (valid only during the call),
// and returns the newest generation, the legacy layout's one key included.
func scanBranch(st *persistence.Store, branch string, give func(g uint64, env []byte)) (uint64, error) {
	var last uint64
	prefix := persistence.BranchGenerationPrefix(branch)
	err := st.Scan(prefix, nil, func(k, v []byte) (bool, error) {
		if g, ok := persistence.ParseBranchGeneration(prefix, k); ok {
			last = max(last, g)
			if give != nil {
				give(g, v)
			}
		}
		return true, nil
	})
	if err != nil {
		return last, err
	}
	return withLegacy(st, branch, last)
}

// withLegacy is last, or the generation the legacy layout's one key
// holds if that is newer.
func withLegacy(st *persistence.Store, branch string, last uint64) (uint64, error) {
	var legacy uint64
	if err := st.Get(persistence.LegacyBranchKey(branch), &legacy); err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return last, err
	}
	return max(last, legacy), nil
}
