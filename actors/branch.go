package actors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/persistence"
)

// The branch kind: a branch's route-generation counter on its own machine
// (environment.StepBranch), one actor per branch like every other entity.
// A created preview asks its branch (its AskGeneration effect, a message);
// the branch commits the next generation under its own fence and tells the
// preview (its Give effect, a message back), on a single node and on a
// cluster alike (I14): no mailbox waits on another.

// BranchRecord is a branch's durable record: one key per generation given
// out (b/<branch>/<n>, holding the preview it went to), the last
// environment.RecentGivings of them kept, older ones deleted.
type BranchRecord struct{ Branch environment.Branch }

type branches = runtime.Entities[BranchRecord, environment.NextGeneration, environment.BranchOutcome]

type branchKind struct{ sys *System }

func (branchKind) Name() string { return "branch" }

// Load reads the recent givings and the newest generation; a branch that
// never gave one out is at 0 and exists all the same (its first preview
// asks it).
func (k branchKind) Load(name string) (BranchRecord, bool, error) {
	b, err := loadBranch(k.sys.cfg.Store, name)
	return BranchRecord{Branch: b}, err == nil, err
}

func (branchKind) Step(rec BranchRecord, ev environment.NextGeneration, now time.Time) (BranchRecord, environment.BranchOutcome) {
	b, out := environment.StepBranch(rec.Branch, ev, now)
	return BranchRecord{Branch: b}, out
}

// Stage writes the new giving's key; the one that fell out of the recent
// givings goes.
func (branchKind) Stage(b persistence.Writer, name string, _, _ BranchRecord, out environment.BranchOutcome) {
	for _, g := range out.Records {
		b.Set(persistence.BranchGenerationKey(name, g.Generation), []byte(g.Env))
		if g.Generation > environment.RecentGivings {
			b.Delete(persistence.BranchGenerationKey(name, g.Generation-environment.RecentGivings))
		}
	}
}

// Sends tells each asker its generation, once it is durable.
func (k branchKind) Sends(_ string, _ BranchRecord, out environment.BranchOutcome) []runtime.Message {
	var msgs []runtime.Message
	for _, g := range out.Effects {
		msgs = append(msgs, k.sys.envs.Message(g.Env, environment.GenerationGiven{Generation: g.Generation}))
	}
	return msgs
}

// A branch is asked across nodes: the preview may live on another node
// than its branch (C4).
func (branchKind) EncodeEvent(ev environment.NextGeneration) ([]byte, bool) {
	b, _ := json.Marshal(ev)
	return b, true
}

func (branchKind) DecodeEvent(b []byte) (environment.NextGeneration, error) {
	var ev environment.NextGeneration
	if err := strictJSON(b, &ev); err != nil || !environment.ValidID(ev.For) {
		return ev, fmt.Errorf("a branch is asked {\"For\": environment id}: %v", err)
	}
	return ev, nil
}
