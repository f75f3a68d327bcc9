// Command warden-sim runs the deterministic simulator (docs/rules/simulation.md):
// seeds of a simulated world, faults and crashes included, checked by the
// oracles. It is a program of its own so that the server links no test
// code: `go list -deps ./cmd/warden` names neither the simulator nor
// net/http/httptest (TestServerLinksNoSimulator).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/sim"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the command on args: 0, a failed seed's code, or 2 for a command
// line it cannot run.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("warden-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: warden-sim --seed N | --seeds K [--from N] [--nodes 3] [--check-determinism]\n\n  warden-sim --seeds 20 --check-determinism\n  warden-sim --seed 7 --nodes 3 --trace")
		fs.PrintDefaults()
	}
	simulate := sim.Command(fs, stdout, stderr, mdreport.Replace)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (where a batch's time goes)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "warden-sim:", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	code, usage := simulate(fs.Args())
	if usage != nil {
		fmt.Fprintln(stderr, "warden-sim:", usage)
		return 2
	}
	return code
}
