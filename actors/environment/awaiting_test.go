package environment_test

import (
	"testing"
	"time"

	. "github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/explaincheck"
)

// TestO17EnvironmentAwaitingListsWhatStepAccepts holds an environment's
// awaiting to Step both ways on every state the golden scripts reach
// (explaincheck): each name it lists is one some probe of that name moves
// the environment with, and each probe that moves it is listed by its
// name.
func TestO17EnvironmentAwaitingListsWhatStepAccepts(t *testing.T) {
	states := 0
	walkGoldens(t, func(t *testing.T, pos string, m Machine, e Env, now time.Time) {
		states++
		for _, bad := range explaincheck.Environment(m, e, now) {
			t.Errorf("%s: %s", pos, bad)
		}
	})
	if states < 100 {
		t.Fatalf("only %d states walked", states)
	}
}
