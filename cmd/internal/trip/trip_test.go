package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxTripFiles bounds the files of the module a callback's trip runs code
// in: those every one of three counted callbacks ran code in, listed in
// testdata/callback-trip.txt. Counted this way, a file where one
// statement runs (a clock's Now) counts as much as the step
// (docs/architecture.md, "A callback's trip"). A window may also see a
// timer of the process fire (a wake, a sweep): maxWindowFiles bounds
// each window's own count.
const (
	maxTripFiles   = 20
	maxWindowFiles = maxTripFiles + 2
)

// TestACallbacksTripIsCountedAndDoesNotGrow counts, rather than traces by
// hand, the files a callback's trip runs code in: this command built with
// coverage counters on every package of the module, three durable
// callbacks over HTTP each with the counters cleared before it, and every
// non-test file of the module with a statement run in each of the three
// windows listed (this command's own files and its client, testkit's,
// aside). The list is written to testdata/callback-trip.txt, which
// docs/architecture.md shows.
func TestACallbacksTripIsCountedAndDoesNotGrow(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "trip")
	build := exec.Command("go", "build", "-cover", "-covermode=atomic", "-coverpkg=github.com/wardenhq/warden/...", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	counters := filepath.Join(dir, "counters")
	require.NoError(t, os.Mkdir(counters, 0o755))
	trip := exec.Command(bin, filepath.Join(dir, "store"), counters)
	trip.Env = append(os.Environ(), "GOCOVERDIR="+filepath.Join(dir, "exit")) // the counters at exit, not read
	require.NoError(t, os.Mkdir(filepath.Join(dir, "exit"), 0o755))
	out, err = trip.CombinedOutput()
	require.NoError(t, err, "%s", out)

	windows, err := os.ReadDir(counters)
	require.NoError(t, err)
	require.Len(t, windows, 3, "a window of counters for each counted callback")
	var files []string
	for i, d := range windows {
		window := filesRun(t, filepath.Join(counters, d.Name()))
		require.LessOrEqual(t, len(window), maxWindowFiles, "callback %s's window:\n%s", d.Name(), strings.Join(window, "\n"))
		if i == 0 {
			files = window
		}
		files = slices.DeleteFunc(files, func(f string) bool { return !slices.Contains(window, f) })
	}
	list := "# the module's files one callback's trip ran code in (" + t.Name() + ")\n" + strings.Join(files, "\n") + "\n"
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "callback-trip.txt"), []byte(list), 0o644))
	require.NotEmpty(t, files)
	require.Contains(t, files, "actors/marquee/machine.go", "the count saw the machine's step")
	require.NotContains(t, files, "actors/runtime/cluster.go", "a single node neither fences nor confirms: it runs none of the cluster's code")
	require.NotContains(t, files, "httpapi/auth.go", "a callback's credential is checked by the webhook, not with the operators'")
	require.LessOrEqual(t, len(files), maxTripFiles, "the callback's trip:\n%s", list)
}

// filesRun reads the counters in dir (go tool covdata) and returns the
// module's files with a statement run, sorted.
func filesRun(t *testing.T, dir string) []string {
	t.Helper()
	prof := filepath.Join(dir, "profile.txt")
	out, err := exec.Command("go", "tool", "covdata", "textfmt", "-i", dir, "-o", prof).CombinedOutput()
	require.NoError(t, err, "%s", out)
	f, err := os.Open(prof)
	require.NoError(t, err)
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] == "0" {
			continue
		}
		file, _, _ := strings.Cut(fields[0], ":")
		file = strings.TrimPrefix(file, "github.com/wardenhq/warden/")
		if !strings.HasPrefix(file, "cmd/internal/") { // the command and its client (testkit)
			seen[file] = true
		}
	}
	require.NoError(t, sc.Err())
	files := make([]string, 0, len(seen))
	for f := range seen {
		files = append(files, f)
	}
	slices.Sort(files)
	return files
}
