package environment

import "testing"

// TestActivatesRouteNext: only an environment at app-ready with nothing in
// flight is about to activate its route; every phase is asked, the last
// removal step (which has no effect) included.
func TestActivatesRouteNext(t *testing.T) {
	for _, tr := range transitions {
		e := Env{State: tr.from}
		if got, want := e.ActivatesRouteNext(), tr.from == AppReady; got != want {
			t.Errorf("%s: ActivatesRouteNext = %t, want %t", tr.from, got, want)
		}
	}
	if (Env{State: AppReady, Attempt: &Attempt{}}).ActivatesRouteNext() {
		t.Error("an attempt in flight is not a next activation")
	}
	if (Env{State: Ready}).ActivatesRouteNext() || (Env{State: Removed}).ActivatesRouteNext() {
		t.Error("no transition, no activation")
	}
}
