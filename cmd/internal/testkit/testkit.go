// Package testkit is what warden's crash harnesses and benchmark share:
// building the real binary, speaking to it over HTTP the way a webhook
// sender and an operator do, and the fake GitHub dispatch API's ledger of
// dispatches (I2: no generation dispatched twice).
package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Check reports whether the tests run at make check's size: the long
// crash and cluster runs, the simulator's full batches, the release
// build made twice. make test runs the same tests smaller, so every rule
// is tested there too; make check sets WARDEN_CHECK=1.
func Check() bool { return os.Getenv("WARDEN_CHECK") == "1" }

// Sized is n under make test and long under make check.
func Sized[T any](n, long T) T {
	if Check() {
		return long
	}
	return n
}

// Prebuilt is the binary make test built once for every package's tests
// (WARDEN_TEST_BIN names its directory), if there is one by that name.
func Prebuilt(name string) (string, bool) {
	dir := os.Getenv("WARDEN_TEST_BIN")
	if dir == "" {
		return "", false
	}
	bin := filepath.Join(dir, name)
	_, err := os.Stat(bin)
	return bin, err == nil
}

// BuildWarden builds ./cmd/warden into dir, from the repository root or
// from a test's package directory (cmd/<name>), unless make test built it
// already.
func BuildWarden(dir string) (string, error) {
	bin := filepath.Join(dir, "warden")
	if built, ok := Prebuilt("warden"); ok {
		return bin, os.Symlink(built, bin) // in dir, where a caller may look for it
	}
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/warden").CombinedOutput()
	if err != nil {
		if out2, err2 := exec.Command("go", "build", "-o", bin, "../warden").CombinedOutput(); err2 != nil {
			return "", fmt.Errorf("build warden: %v\n%s\n%s", err, out, out2)
		}
	}
	return bin, nil
}

// BuildWardenWithFloors builds ./cmd/warden with the benchmark's floors
// (-tags benchfloor: --bench-noop serves them) into dir, as BuildWarden
// does; make bench measures this build, no other links the floors.
func BuildWardenWithFloors(dir string) (string, error) {
	bin := filepath.Join(dir, "warden")
	out, err := exec.Command("go", "build", "-tags", "benchfloor", "-o", bin, "./cmd/warden").CombinedOutput()
	if err != nil {
		if out2, err2 := exec.Command("go", "build", "-tags", "benchfloor", "-o", bin, "../warden").CombinedOutput(); err2 != nil {
			return "", fmt.Errorf("build warden with its floors: %v\n%s\n%s", err, out, out2)
		}
	}
	return bin, nil
}

// Do sends one request to base: a JSON body when body is not nil, the
// token as a bearer, the delivery id as Webhook-Id; the answer decoded.
func Do(c *http.Client, base, method, path, token string, body any, delivery string) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if delivery != "" {
		req.Header.Set("Webhook-Id", delivery)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &m)
	return resp.StatusCode, m, nil
}

// Dispatch is one workflow_dispatch the fake GitHub received.
type Dispatch struct {
	Marquee    string
	Generation uint64
	Action     string
}

// Dispatches is the fake GitHub's ledger: every dispatch counted by
// marquee and generation.
type Dispatches struct {
	mu    sync.Mutex
	byGen map[string]map[uint64]int
	total int
}

// Record reads one dispatch request (the GitHub driver's inputs), counts
// it and answers 204; ok is false for a body that does not decode (400).
func (d *Dispatches) Record(w http.ResponseWriter, r *http.Request) (Dispatch, bool) {
	var body struct {
		Inputs map[string]string `json:"inputs"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return Dispatch{}, false
	}
	gen, _ := strconv.ParseUint(body.Inputs["generation"], 10, 64)
	ds := Dispatch{Marquee: body.Inputs["marquee_id"], Generation: gen, Action: body.Inputs["action"]}
	d.mu.Lock()
	if d.byGen == nil {
		d.byGen = map[string]map[uint64]int{}
	}
	if d.byGen[ds.Marquee] == nil {
		d.byGen[ds.Marquee] = map[uint64]int{}
	}
	d.byGen[ds.Marquee][gen]++
	d.total++
	d.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return ds, true
}

// Total is how many dispatches were received.
func (d *Dispatches) Total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// Twice is I2's check: an error naming every generation dispatched more
// than once, nil when none was.
func (d *Dispatches) Twice() error {
	d.mu.Lock()
	var dupes []string
	for id, gens := range d.byGen {
		for g, n := range gens {
			if n > 1 {
				dupes = append(dupes, fmt.Sprintf("%s generation %d dispatched %d times", id, g, n))
			}
		}
	}
	d.mu.Unlock()
	if len(dupes) == 0 {
		return nil
	}
	sort.Strings(dupes)
	return fmt.Errorf("I2: %s", strings.Join(dupes, "; "))
}

// OKScript writes an exec driver into dir that reads its request and
// succeeds: the stand-in for a workflow that is dispatched and never
// heard from (the load comes from the harness's own callbacks).
func OKScript(dir string) (string, error) {
	script := filepath.Join(dir, "ok.sh")
	return script, os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true}'\n"), 0o755)
}

// HistoryPage is how many of a marquee's history entries the harnesses
// read (GET /v1/marquees/{id}/history?limit=HistoryPage).
const HistoryPage = 200

// AppliedFound is I5's check on one marquee's history page: every delivery
// the marquee answered `applied` is in it. A full page may have aged older
// entries out, and is not checked. It returns how many were checked.
func AppliedFound(id string, hist map[string]any, applied []string) (int, error) {
	items, _ := hist["items"].([]any)
	if len(items) >= HistoryPage {
		return 0, nil
	}
	seen := map[string]bool{}
	for _, it := range items {
		if e, ok := it.(map[string]any); ok {
			if d, ok := e["delivery_id"].(string); ok {
				seen[d] = true
			}
		}
	}
	for _, d := range applied {
		if !seen[d] {
			return 0, fmt.Errorf("I5: callback %s to %s was answered applied and is not in its history", d, id)
		}
	}
	return len(applied), nil
}

// Tail is the last n lines of a file, for saying why a process failed.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
