package marquee_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	. "github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/explaincheck"
)

// TestO17AwaitingListsWhatStepAccepts walks every state the golden
// scripts reach and holds explain's awaiting to the machine: every input
// it lists, stepped there, moves the marquee, and every probe that moves
// it (each verb at the current, an older, a newer and no generation, each
// step, the operator's commands, the drivers' answers of every outcome,
// each timer at its deadline) is listed under its name.
func TestO17AwaitingListsWhatStepAccepts(t *testing.T) {
	states := 0
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &harness{m: Machine{Config: DefaultConfig()}, now: epoch}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			h.t = t
			out := h.run(t, d)
			if h.s.ID != "" {
				checkAwaiting(t, d.Pos, h.m, h.s, h.now)
				states++
			}
			return out
		})
	})
	if states < 100 {
		t.Fatalf("only %d states walked", states)
	}
}

// checkAwaiting holds awaiting to Step both ways on s (explaincheck).
func checkAwaiting(t *testing.T, pos string, m Machine, s State, now time.Time) {
	t.Helper()
	for _, bad := range explaincheck.Marquee(m, s, now) {
		t.Errorf("%s: %s", pos, bad)
	}
}
