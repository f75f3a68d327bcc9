package main

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func op(client int, m, kind string, call, ret int64, outcome, serving string) porcupine.Operation {
	if outcome == "unknown" {
		ret = math.MaxInt64
	}
	return porcupine.Operation{ClientId: client, Input: regInput{Marquee: m, Op: kind}, Call: call, Return: ret,
		Output: regOutput{Outcome: outcome, Serving: serving}}
}

// TestIssue20TheCheckerCatchesAStaleAnswer: the linearizability check is
// not one that cannot fail. The issue's trial, a disable committed on the
// new owner and then an enable refused by the resumed old owner as if the
// marquee were still active, is caught; the same history with the enable
// answered by the current state passes; an operation whose answer never
// came may take effect at any later time.
func TestIssue20TheCheckerCatchesAStaleAnswer(t *testing.T) {
	good := []porcupine.Operation{
		op(0, "r-0", "get", 0, 5, "ok", "active"),
		op(0, "r-0", "disable", 10, 20, "ok", "disabled"),
		op(1, "r-0", "enable", 30, 40, "ok", "active"),
		op(1, "r-0", "enable", 50, 60, "conflict", ""),
		op(0, "r-1", "get", 0, 100, "ok", "active"),
	}
	require.NoError(t, checkLinearizable(good))

	stale := append(append([]porcupine.Operation(nil), good[:2]...),
		op(1, "r-0", "enable", 30, 40, "conflict", "")) // "enable needs serving=disabled; r-0 is active"
	require.ErrorContains(t, checkLinearizable(stale), "not linearizable: marquee r-0")

	staleRead := append(append([]porcupine.Operation(nil), good[:2]...), op(1, "r-0", "get", 30, 40, "ok", "active"))
	require.ErrorContains(t, checkLinearizable(staleRead), "not linearizable")

	// A disable that 503'd may have happened; the later read of disabled
	// is explained by it.
	unknown := []porcupine.Operation{
		op(0, "r-2", "disable", 0, 0, "unknown", ""),
		op(1, "r-2", "get", 100, 110, "ok", "disabled"),
		op(1, "r-2", "enable", 120, 130, "ok", "active"),
	}
	require.NoError(t, checkLinearizable(unknown))

	// Concurrent operations may be ordered either way.
	concurrent := []porcupine.Operation{
		op(0, "r-3", "disable", 0, 50, "ok", "disabled"),
		op(1, "r-3", "get", 10, 20, "ok", "active"),
	}
	require.NoError(t, checkLinearizable(concurrent))
}
