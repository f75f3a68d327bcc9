package main

import (
	"os"
	"testing"
	"time"

	"github.com/wardenhq/warden/cmd/internal/testkit"
)

// TestCrashFiftyKills is the crash test at its CI size: 50 SIGKILLs of
// the real process under load (make check; 12 under make test),
// invariants checked after every restart, and warden verify (D6) on the
// store the run left, live and offline.
func TestCrashFiftyKills(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real binary for about two minutes")
	}
	seed, kills := time.Now().UnixNano(), testkit.Sized(12, 50)
	rep, err := Run(Options{Kills: kills, Seed: seed, Log: os.Stderr})
	t.Log(rep)
	if err != nil {
		t.Fatalf("seed %d: %v (replay the schedule: go run ./cmd/warden-crash -kills %d -seed %d)", seed, err, kills, seed)
	}
	if rep.Kills < kills || rep.AppliedChecked == 0 || rep.AdmissionsChecked == 0 || rep.SilentVerified == 0 || rep.Envs == 0 || rep.EnvsChecked == 0 || !rep.StoreVerified {
		t.Fatalf("the run did not exercise enough: %v", rep)
	}
}
