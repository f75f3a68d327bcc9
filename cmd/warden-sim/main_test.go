package main

import (
	"bytes"
	"strings"
	"testing"
)

// One seed runs end to end through the command line and says so; a command
// line the simulator cannot run is refused with usage, not run.
func TestWardenSimRunsASeedAndRefusesABadCommandLine(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run([]string{"--seed", "3"}, &out, &errs); code != 0 {
		t.Fatalf("seed 3: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "seed 3") {
		t.Fatalf("seed 3's report does not name it: %q", out.String())
	}
	out.Reset()
	errs.Reset()
	if code := run([]string{"--no-such-flag"}, &out, &errs); code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
	if !strings.Contains(errs.String(), "usage: warden-sim") {
		t.Fatalf("unknown flag: no usage on stderr: %q", errs.String())
	}
}
