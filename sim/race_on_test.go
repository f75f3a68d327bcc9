//go:build race

package sim

// raceEnabled: the race detector slows the simulator about fivefold; the
// full CI batch runs without it (see the Makefile's test target).
const raceEnabled = true
