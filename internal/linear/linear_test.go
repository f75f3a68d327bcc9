package linear

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func op(client int, m, kind string, call, ret int64, outcome, serving string) porcupine.Operation {
	if outcome == "unknown" {
		ret = math.MaxInt64
	}
	return porcupine.Operation{ClientId: client, Input: Input{Marquee: m, Op: kind}, Call: call, Return: ret,
		Output: Output{Outcome: outcome, Serving: serving}}
}

// TestC4ATheCheckerCatchesAStaleAnswer: the linearizability check is
// not one that cannot fail. The trial, a disable committed on the
// new owner and then an enable refused by the resumed old owner as if the
// marquee were still active, is caught; the same history with the enable
// answered by the current state passes; an operation whose answer never
// came may take effect at any later time.
func TestC4ATheCheckerCatchesAStaleAnswer(t *testing.T) {
	good := []porcupine.Operation{
		op(0, "r-0", "get", 0, 5, "ok", "active"),
		op(0, "r-0", "disable", 10, 20, "ok", "disabled"),
		op(1, "r-0", "enable", 30, 40, "ok", "active"),
		op(1, "r-0", "enable", 50, 60, "conflict", ""),
		op(0, "r-1", "get", 0, 100, "ok", "active"),
	}
	require.NoError(t, Check(good, Active, time.Minute))

	stale := append(append([]porcupine.Operation(nil), good[:2]...),
		op(1, "r-0", "enable", 30, 40, "conflict", "")) // "enable needs serving=disabled; r-0 is active"
	require.ErrorContains(t, Check(stale, Active, time.Minute), "not linearizable: marquee r-0")

	staleRead := append(append([]porcupine.Operation(nil), good[:2]...), op(1, "r-0", "get", 30, 40, "ok", "active"))
	require.ErrorContains(t, Check(staleRead, Active, time.Minute), "not linearizable")

	// A disable that 503'd may have happened; the later read of disabled
	// is explained by it.
	unknown := []porcupine.Operation{
		op(0, "r-2", "disable", 0, 0, "unknown", ""),
		op(1, "r-2", "get", 100, 110, "ok", "disabled"),
		op(1, "r-2", "enable", 120, 130, "ok", "active"),
	}
	require.NoError(t, Check(unknown, Active, time.Minute))

	// Concurrent operations may be ordered either way.
	concurrent := []porcupine.Operation{
		op(0, "r-3", "disable", 0, 50, "ok", "disabled"),
		op(1, "r-3", "get", 10, 20, "ok", "active"),
	}
	require.NoError(t, Check(concurrent, Active, time.Minute))
}

// TestC12ACreatesAreInTheModel: the simulator's clients create their
// marquees in the history: a create answered 409 while the marquee was
// absent (a forward retried after it had been applied) is caught, as is
// an ok of a create that found it existing; a create whose answer never
// came explains a later conflict.
func TestC12ACreatesAreInTheModel(t *testing.T) {
	good := []porcupine.Operation{
		op(0, "l-0", "get", 0, 5, "notfound", ""),
		op(0, "l-0", "create", 10, 20, "ok", "active"),
		op(1, "l-0", "create", 30, 40, "conflict", ""),
		op(1, "l-0", "disable", 50, 60, "ok", "disabled"),
	}
	require.NoError(t, Check(good, Absent, time.Minute))

	retried := []porcupine.Operation{op(0, "l-1", "create", 10, 20, "conflict", "")}
	require.ErrorContains(t, Check(retried, Absent, time.Minute), "not linearizable: marquee l-1")

	twice := []porcupine.Operation{op(0, "l-2", "create", 0, 5, "ok", "active"), op(1, "l-2", "create", 10, 20, "ok", "active")}
	require.ErrorContains(t, Check(twice, Absent, time.Minute), "not linearizable")

	lost := []porcupine.Operation{op(0, "l-3", "create", 0, 0, "unknown", ""), op(0, "l-3", "create", 10, 20, "conflict", "")}
	require.NoError(t, Check(lost, Absent, time.Minute))
}
