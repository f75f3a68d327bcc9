// Command warden-cluster-crash is the cluster's fault-injection test
// (docs/rules/cluster.md C6-C8): three real warden processes on loopback, each
// embedding an etcd member, under load from marquee workflows and
// operators sent to all three, while it kills the owner of the busiest
// shard with SIGKILL, pauses an owner with SIGSTOP for longer than its
// lease and resumes it, restarts every node in turn, and adds a fourth
// member and drains and removes it. Every client operation is recorded as
// ok, failed or unknown (Jepsen's semantics), and at the end the history
// is checked: no acknowledged callback lost (I5), no generation dispatched
// twice, no admission over its limit at any revision of the store
// (I7), and no write accepted at a stale epoch (read from etcd's own
// history of the shard keys and of the epochs every transaction was fenced
// at). It reports failover times. `make cluster-crash DURATION=...` runs
// it for as long as asked; a test in `make test` runs a short one.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o Options
	flag.DurationVar(&o.Duration, "duration", 2*time.Minute, "how long to inject faults")
	flag.IntVar(&o.MinKills, "min-kills", 0, "keep going past -duration until this many owner kills")
	flag.IntVar(&o.MinPauses, "min-pauses", 0, "keep going past -duration until this many pauses past the lease")
	flag.BoolVar(&o.EveryFault, "every-fault", true, "keep going past -duration until every kind of fault happened at least once")
	flag.Int64Var(&o.Seed, "seed", time.Now().UnixNano(), "seed of the fault schedule and the clients' choices")
	flag.StringVar(&o.Binary, "warden", "", "warden binary (default: build ./cmd/warden)")
	flag.Parse()
	o.Log = os.Stderr
	rep, err := Run(o)
	fmt.Println(rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-cluster-crash: FAILED:", err)
		os.Exit(1)
	}
}
