// Package prometheus holds example alerting rules for warden's metrics
// (O13); this test loads them with the Prometheus rules library, which
// parses every expression, and checks each names a metric warden exports.
package prometheus

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"
)

// exported are the metric families warden serves (actors/metrics.go,
// actors/observe.go); a rule on any other name would never fire.
var exported = map[string]bool{
	"warden_marquee_failures_total": true, "warden_drift_open": true, "warden_pool_queued": true, "warden_pool_reserved": true,
	"warden_pool_limit": true, "warden_actors_parked": true, "warden_driver_seconds_count": true, "warden_persist_seconds_bucket": true,
	"warden_cluster_revocations_total": true, "warden_cluster_revocations_held_total": true, "warden_cluster_leases_lost_total": true,
	"warden_cluster_lapses_recovered_total": true, "warden_storage_failed": true, "warden_storage_read_only": true,
	"warden_storage_free_bytes": true, "warden_storage_reserve_bytes": true,
}

var metricName = regexp.MustCompile(`\bwarden_[a-z_]+\b`)

func TestO13AlertingRulesLoad(t *testing.T) {
	raw, err := os.ReadFile("warden-alerts.yml")
	require.NoError(t, err)
	groups, errs := rulefmt.Parse(raw)
	require.Empty(t, errs, "the rules file must load in Prometheus")
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert.Value)
			for _, m := range metricName.FindAllString(r.Expr.Value, -1) {
				require.True(t, exported[m], "%s uses %s, which warden does not export", r.Alert.Value, m)
			}
		}
	}
	require.Subset(t, names, []string{"WardenMarqueeRetriesExhausted", "WardenDriftOpenForLong", "WardenPoolQueueWaitingLong", "WardenActorsParked",
		"WardenStorageFailed", "WardenStorageLow"})
}

// TestO13AlertsFireOnSeriesAsWardenExportsThem runs promtool's rule unit
// tests (warden-alerts.test.yml): among them the first M21 failure after
// a start, over a counter that was at 0 before it. Debian's
// prometheus package brings promtool; .ci/run installs it.
func TestO13AlertsFireOnSeriesAsWardenExportsThem(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus; .ci/run installs it)")
	}
	out, err := exec.Command(promtool, "test", "rules", "warden-alerts.test.yml").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SUCCESS")
}
