// Command warden-crash is the crash test: it runs the real warden
// binary, streams callbacks and operator commands at it from several
// clients, kills it with SIGKILL at random moments, restarts it on the same
// data directory, and after every restart checks what must survive a crash:
// every callback answered `applied` is reflected (I5), every admission
// answered is kept (I10), no active marquee serves another generation's
// connection (I1), no generation is dispatched twice, no pool is over
// its limit or holds a job twice or for a settled marquee (I7, I9); at the
// end, every silent workflow's stuck retries fired exactly once each (M21,
// M23). Preview environments run alongside on the reference drivers of
// examples/preview: every one answered 201 survives each restart (E1), and
// at the end each is ready or a tombstone as asked, nothing of a tombstone
// is left (I12) and each branch route is held by its newest live preview
// (I14). `make crash` runs it for as long as asked; a test runs 50 kills.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o Options
	flag.IntVar(&o.Kills, "kills", 0, "number of SIGKILLs (0: until -duration)")
	flag.DurationVar(&o.Duration, "duration", 2*time.Minute, "how long to run when -kills is 0")
	flag.Int64Var(&o.Seed, "seed", time.Now().UnixNano(), "seed of the kill schedule and the clients' choices")
	flag.StringVar(&o.Binary, "warden", "", "warden binary (default: build ./cmd/warden)")
	flag.Parse()
	o.Log = os.Stderr
	rep, err := Run(o)
	fmt.Println(rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden-crash: FAILED:", err)
		os.Exit(1)
	}
}
