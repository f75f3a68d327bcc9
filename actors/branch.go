package actors

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
)

// The branch kind: a branch's route-generation counter on its own machine
// (environment.StepBranch), one actor per branch like every other entity.
// A created preview asks its branch (its AskGeneration effect, a message);
// the branch commits the next generation under its own fence and tells the
// preview (its Give effect, a message back), on a single node and on a
// cluster alike: no mailbox waits on another.

type branches = runtime.Entities[record.Branch, environment.NextGeneration, environment.BranchOutcome]

// branchKind is the branch counter on the runtime; its writes are
// record.BranchWrites.
type branchKind struct {
	record.BranchWrites
	sys *System
}

func (branchKind) Name() string { return branchKindName }

// Load reads the recent givings and the newest generation; a branch that
// never gave one out is at 0 and exists all the same (its first preview
// asks it).
func (k branchKind) Load(name string) (record.Branch, bool, error) {
	b, err := record.LoadBranch(k.sys.cfg.Store, name)
	return record.Branch{Branch: b}, err == nil, err
}

// Step gives the next generation; its outcome tells each asker its
// generation, once it is durable.
func (branchKind) Step(rec record.Branch, ev environment.NextGeneration, now time.Time) (record.Branch, environment.BranchOutcome) {
	b, out := environment.StepBranch(rec.Branch, ev, now)
	for _, g := range out.Effects {
		out.Messages = append(out.Messages, entity.Message{Kind: envKindName, ID: g.Env, Event: environment.Event(environment.GenerationGiven{Generation: g.Generation})})
	}
	return record.Branch{Branch: b}, out
}

// A branch that never gave a generation out exists all the same.
func (branchKind) Stored(string) (bool, error)                           { return true, nil }
func (branchKind) Admit(record.Branch, environment.NextGeneration) error { return nil }
func (branchKind) Holds(record.Branch) bool                              { return false }
func (branchKind) Idle(record.Branch, bool) bool                         { return false }
func (branchKind) Copy(rec record.Branch) record.Branch                  { return rec }

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
