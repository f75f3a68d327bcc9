// Package record holds each kind's durable record: its type, what one
// step writes of it into the runtime's batch (a Stager, with the kind's
// wake letter), and how a store's copy is read back, secrets opened and
// checked. The shell runs the kinds on these; the simulator's oracles,
// the machines' golden suites and the benchmarks' seeding read and write
// records here without a System. It imports the rules, the runtime's
// Stager contract, persistence and trust; never the shell.
package record

import (
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// Each kind's writes as the runtime stages them.
var (
	_ runtime.Stager[Marquee, marquee.Outcome]          = MarqueeWrites{}
	_ runtime.Stager[Environment, environment.Outcome]  = EnvironmentWrites{}
	_ runtime.Stager[Pool, admission.Outcome]           = PoolWrites{}
	_ runtime.Stager[Branch, environment.BranchOutcome] = BranchWrites{}
)

// listPage is one page of the records of type R under prefix, each shown
// as its part V (see persistence.ListPage).
func listPage[R, V any](st *persistence.Store, prefix, after string, limit, maxScan int, part func(R) V, keep func(V) bool) ([]V, string, []persistence.Malformed, error) {
	return persistence.ListPage(st, prefix, after, limit, maxScan, func(k, v []byte) (V, error) {
		var r R
		err := persistence.Decode(k, v, &r)
		return part(r), err
	}, keep)
}
