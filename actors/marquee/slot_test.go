package marquee_test

import (
	"testing"
	"time"

	. "github.com/wardenhq/warden/actors/marquee"
)

// TestA7ASettledTutorialSaysItsReleaseAgain: a new owner repeats the
// release only for a settled (or reaped) tutorial marquee that no longer
// holds an admission; one still asking or holding, one without a pool and
// one still at work send nothing, so a repeated release never frees a
// slot the marquee still needs.
func TestA7ASettledTutorialSaysItsReleaseAgain(t *testing.T) {
	settled := State{ID: "m", Kind: Tutorial, Pool: "p", Lifecycle: Provisioned}
	cases := []struct {
		name string
		edit func(*State)
		want bool
	}{
		{"provisioned", func(*State) {}, true},
		{"failed", func(s *State) { s.Lifecycle = Failed }, true},
		{"destroyed", func(s *State) { s.Lifecycle = Destroyed }, true},
		{"reaped", func(s *State) { s.Lifecycle = Provisioning; s.Tombstone = &Tombstone{Reason: "x", At: time.Unix(1, 0)} }, true},
		{"still provisioning", func(s *State) { s.Lifecycle = Provisioning }, false},
		{"still holding", func(s *State) { s.Admission = &Admission{Status: AdmissionReserved} }, false},
		{"no pool", func(s *State) { s.Pool = "" }, false},
		{"not a tutorial", func(s *State) { s.Kind = BYO }, false},
	}
	for _, c := range cases {
		s := settled
		c.edit(&s)
		pool, ok := SlotMayBeHeld(s)
		if ok != c.want || (ok && pool != "p") {
			t.Errorf("%s: SlotMayBeHeld = %q, %v; want %v", c.name, pool, ok, c.want)
		}
	}
}
