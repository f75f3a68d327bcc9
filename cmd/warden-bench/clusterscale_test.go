package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/cmd/internal/testkit"
)

// TestD10TheClusterAtScaleBenchRuns runs make bench's cluster-at-scale
// measurement small (2,000 marquees under make check, 500 under make
// test; fifteen seconds of callbacks after five unmeasured): the
// seeded marquees are read through the nodes, the busiest node's shards
// are taken over, every callback of the steady run is answered once, and
// the report has every figure. The figures at 100,000 are make bench's
// (BENCHMARKS.md).
func TestD10TheClusterAtScaleBenchRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three warden nodes")
	}
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	n := testkit.Sized(500, 2000)
	require.NoError(t, runClusterScale(out, n, 5*time.Second, 15*time.Second, time.Minute, 100))
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	report := string(raw)
	require.Contains(t, report, "## The cluster at scale (D10), etcd history kept 1m0s")
	for _, figure := range []string{fmt.Sprintf("seeding %d marquees", n), "store on disk", "start-up to ready", "failover of the busiest node", "a moved shard reads",
		"steady callbacks at 100 a second", " 0 errors, 0 duplicates", "etcd's quota", "per acknowledged callback, just after a compaction"} {
		require.Contains(t, report, figure)
	}
	require.False(t, strings.Contains(report, " 0 requests measured,"), "the steady run sent callbacks")
}

// TestLineFitIsLeastSquares: the growth figure's slope through points on
// a line is the line's, and one sample alone gives no slope.
func TestLineFitIsLeastSquares(t *testing.T) {
	var f lineFit
	f.add(0, 10)
	require.Zero(t, f.slope())
	for x := 1.0; x <= 10; x++ {
		f.add(x, 10+40*x+math.Mod(x, 2)) // 40 bytes a callback, and noise
	}
	require.InDelta(t, 40, f.slope(), 0.2)
}
