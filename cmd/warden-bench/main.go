// Command warden-bench measures the durable webhook path against a no-op
// handler on the same server stack, over loopback, in one run: the real
// warden binary (built fresh) serves both POST /v1/webhooks/terraform
// (authenticate, decode, decide in the marquee's actor, one synced Pebble
// batch, answer) and POST /v1/webhooks/noop (authenticate, decode, answer).
// Each figure is reported next to the baseline as a ratio, never as an
// absolute pass/fail. `make bench` writes BENCHMARKS.md.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"warden/cmd/internal/mdreport"
)

const (
	callbackToken = "bench-callback-token"
	operatorToken = "bench-operator-token"
)

func main() {
	duration := flag.Duration("duration", 5*time.Second, "measured time per scenario")
	warmup := flag.Duration("warmup", time.Second, "unmeasured time before each scenario")
	out := flag.String("out", "", "write the results to this markdown file (else stdout only)")
	connsFlag := flag.String("conns", "1,64", "connection counts")
	pathsFlag := flag.String("paths", "noop,terraform", "webhook paths to load, in order")
	scale := flag.Bool("scale", false, "measure actors at scale (memory, activation, start-up) instead of the webhook path")
	sizes := flag.String("sizes", "10000,100000,1000000", "stored marquees for the start-up figure")
	gen := flag.String("load", "auto", "load generator: wrk (Debian's wrk), go (built in), or auto (wrk if installed)")
	flag.Parse()
	if *gen == "auto" {
		*gen = "go"
		if _, err := exec.LookPath("wrk"); err == nil {
			*gen = "wrk"
		}
	}
	loadGen = *gen
	if *scale {
		var ns []int
		for _, f := range strings.Split(*sizes, ",") {
			var n int
			fmt.Sscan(f, &n)
			ns = append(ns, n)
		}
		if err := runScale(*out, ns); err != nil {
			fmt.Fprintln(os.Stderr, "warden-bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*duration, *warmup, *out, *connsFlag, strings.Split(*pathsFlag, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "warden-bench:", err)
		os.Exit(1)
	}
}

type result struct {
	path     string
	conns    int
	requests int
	errors   int
	rps      float64
	p50, p99 time.Duration
}

func run(duration, warmup time.Duration, out, connsFlag string, paths []string) error {
	var conns []int
	for _, c := range strings.Split(connsFlag, ",") {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n < 1 || n > 1024 {
			return fmt.Errorf("bad -conns %q", connsFlag)
		}
		conns = append(conns, n)
	}
	maxConns := 0
	for _, c := range conns {
		maxConns = max(maxConns, c)
	}
	tmp, err := os.MkdirTemp("", "warden-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "warden")
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/warden").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, b)
	}
	okScript := filepath.Join(tmp, "ok.sh")
	if err := os.WriteFile(okScript, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true}'\n"), 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", filepath.Join(tmp, "data"), "--bench-noop",
		"--dispatch", "exec", "--dispatch-command", okScript, "--bootstrap", "exec", "--bootstrap-command", okScript,
		"--pool", fmt.Sprintf("default=%d", maxConns), "--log-format", "json")
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+callbackToken, "WARDEN_OPERATOR_TOKEN="+operatorToken)
	logf, _ := os.Create(filepath.Join(tmp, "warden.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 2048}, Timeout: 10 * time.Second}
	if err := waitReady(client, base); err != nil {
		return err
	}
	// One tutorial marquee per connection, each admitted and dispatched, so
	// every callback lands on a live attempt of generation 1.
	for i := 0; i < maxConns; i++ {
		body := fmt.Sprintf(`{"id":"m-%03d","kind":"tutorial"}`, i)
		if st, err := post(client, base+"/v1/marquees", operatorToken, body, ""); err != nil || st != 201 {
			return fmt.Errorf("create marquee %d: %d %v", i, st, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	wrkScript = filepath.Join(tmp, "load.lua")
	if err := os.WriteFile(wrkScript, []byte(fmt.Sprintf(wrkLua, maxConns, callbackToken)), 0o644); err != nil {
		return err
	}

	var results []result
	for _, c := range conns {
		for _, path := range paths {
			_ = load(client, base, path, c, warmup)
			r := load(client, base, path, c, duration)
			results = append(results, r)
			fmt.Printf("%-9s conns=%-3d %8.0f req/s  p50 %-9s p99 %-9s (%d requests, %d errors)\n",
				r.path, r.conns, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.requests, r.errors)
		}
	}
	report := render(results, duration, conns)
	fmt.Print(report)
	if out != "" {
		return writeSection(out, report)
	}
	return nil
}

func waitReady(c *http.Client, base string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := c.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("warden did not become ready")
}

func post(c *http.Client, url, token, body, delivery string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if delivery != "" {
		req.Header.Set("Webhook-Id", delivery)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

var (
	deliverySeq atomic.Uint64
	loadGen     string
	wrkScript   string
)

// wrkLua gives every request a fresh Webhook-Id and spreads requests over
// the marquees, as a fleet of workflows would.
const wrkLua = `
local n = 0
local tid = 0
local marquees = %d
setup = function(thread) thread:set("tid", tid); tid = tid + 1 end
request = function()
  n = n + 1
  local m = string.format("m-%%03d", (n * 7 + tid * 13) %% marquees)
  local body = '{"marquee_id":"' .. m .. '","verb":"step","generation":1,"step":"vm_starting"}'
  return wrk.format("POST", wrk.path, {["Authorization"]="Bearer %s", ["Content-Type"]="application/json",
    ["Webhook-Id"]="wrk-" .. tid .. "-" .. n .. "-" .. math.random(1000000000)}, body)
end
`

// loadWrk runs Debian's wrk and reads its summary.
func loadWrk(base, path string, conns int, d time.Duration) result {
	threads := min(conns, 2)
	out, err := exec.Command("wrk", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(conns), "-d", fmt.Sprintf("%ds", max(1, int(d.Seconds()))),
		"--latency", "-s", wrkScript, base+"/v1/webhooks/"+path).CombinedOutput()
	r := result{path: path, conns: conns}
	if err != nil {
		r.errors = 1
		return r
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			fmt.Sscan(f[1], &r.rps)
		case len(f) == 2 && f[0] == "50%":
			r.p50, _ = time.ParseDuration(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99, _ = time.ParseDuration(f[1])
		case len(f) >= 5 && f[1] == "requests" && f[2] == "in":
			fmt.Sscan(f[0], &r.requests)
		case len(f) == 2 && f[0] == "Non-2xx":
			fmt.Sscan(f[1], &r.errors)
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			r.errors++
		}
	}
	return r
}

// load runs conns closed-loop clients for d. Client i always speaks for
// marquee i, each request with a fresh Webhook-Id, so every durable request
// is a real transition: snapshot, history entry and dedup record in one
// synced batch.
func load(c *http.Client, base, path string, conns int, d time.Duration) result {
	if loadGen == "wrk" {
		return loadWrk(base, path, conns, d)
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"marquee_id": fmt.Sprintf("m-%03d", i), "verb": "step", "generation": 1, "step": "vm_starting"})
			local := make([]time.Duration, 0, 4096)
			for time.Now().Before(stop) {
				start := time.Now()
				st, err := post(c, base+"/v1/webhooks/"+path, callbackToken, string(bytes.TrimSpace(body)), fmt.Sprintf("bench-%d", deliverySeq.Add(1)))
				if err != nil || st != 200 {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{path: path, conns: conns, requests: len(lat), errors: int(errs.Load()), rps: float64(len(lat)) / d.Seconds()}
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r
}

func render(rs []result, d time.Duration, conns []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Durable webhook path vs no-op (loopback)\n\n")
	fmt.Fprintf(&b, "Command: `make bench` (`go run ./cmd/warden-bench -out BENCHMARKS.md`), %s per scenario after a warm-up.\n", d)
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Run: %s on %s, %s/%s, %d CPUs, %s. Load generator: %s, on the same machine as the server (it shares the CPUs).\n\n",
		time.Now().UTC().Format("2006-01-02"), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), loadGen)
	fmt.Fprintf(&b, "| conns | path | req/s | p50 | p99 | errors | throughput vs no-op |\n|---|---|---|---|---|---|---|\n")
	byKey := map[string]result{}
	for _, r := range rs {
		byKey[fmt.Sprintf("%s/%d", r.path, r.conns)] = r
	}
	for _, c := range conns {
		noop := byKey[fmt.Sprintf("noop/%d", c)]
		for _, p := range []string{"noop", "terraform"} {
			r := byKey[fmt.Sprintf("%s/%d", p, c)]
			ratio := "1.00 (baseline)"
			if p != "noop" && noop.rps > 0 {
				ratio = fmt.Sprintf("%.2f", r.rps/noop.rps)
			}
			name := map[string]string{"noop": "no-op", "terraform": "durable"}[p]
			fmt.Fprintf(&b, "| %d | %s | %.0f | %s | %s | %d | %s |\n", c, name, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.errors, ratio)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func writeSection(path, section string) error {
	return mdreport.Replace(path, "## Durable webhook path vs no-op (loopback)", section)
}
