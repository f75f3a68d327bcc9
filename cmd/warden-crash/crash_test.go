package main

import (
	"os"
	"testing"
	"time"
)

// TestCrashFiftyKills is the crash test at its CI size: 50 SIGKILLs of
// the real process under load, invariants checked after every restart,
// and warden verify (D6) on the store the run left, live and offline.
func TestCrashFiftyKills(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs the real binary for about two minutes")
	}
	seed := time.Now().UnixNano()
	rep, err := Run(Options{Kills: 50, Seed: seed, Log: os.Stderr})
	t.Log(rep)
	if err != nil {
		t.Fatalf("seed %d: %v (replay the schedule: go run ./cmd/warden-crash -kills 50 -seed %d)", seed, err, seed)
	}
	if rep.Kills < 50 || rep.AppliedChecked == 0 || rep.AdmissionsChecked == 0 || rep.SilentVerified == 0 || rep.Envs == 0 || rep.EnvsChecked == 0 || !rep.StoreVerified {
		t.Fatalf("the run did not exercise enough: %v", rep)
	}
}
