package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/testports"
)

// The cluster figures: the durable callback path at 64 connections on
// one node (Pebble, the default), on one node whose store is a one-member
// etcd, and on three nodes with embedded members, loaded either through
// any node (two requests in three are forwarded to the owner) or straight
// at the owner of each marquee (a client or balancer that knows the shard
// map). On one machine the three nodes share two cores and one disk: this
// shows the overhead of the cluster, not a speed-up.

const clusterConns = 64

// clusterProfiles, if set, is where each node of the three-node runs
// writes its CPU profile (-cluster-profiles).
var clusterProfiles string

// wardenBin is the binary every figure starts (-warden); empty: one
// built from this checkout.
var wardenBin string

// wardenBinary is -warden's binary, or one built into dir from this
// checkout with the benchmark's floors (-tags benchfloor), which the
// floors' rows need.
func wardenBinary(dir string) (string, error) {
	if wardenBin != "" {
		return wardenBin, nil
	}
	return testkit.BuildWardenWithFloors(dir)
}

type clusterSetup struct {
	name  string
	nodes int
	etcd  bool
}

type clusterRun struct {
	setup  string
	result result
}

func runCluster(out string, duration, warmup time.Duration) error {
	tmp, bin, okScript, shared, err := clusterKit("warden-bench-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var runs []clusterRun
	for i, setup := range []clusterSetup{{"one node, Pebble (the default)", 1, false}, {"one node, etcd (one embedded member)", 1, true}, {"three nodes, etcd (three embedded members)", 3, true}} {
		nodes, stop, err := startNodes(bin, okScript, shared, filepath.Join(tmp, fmt.Sprint("s", i)), setup)
		if err != nil {
			return fmt.Errorf("%s: %w", setup.name, err)
		}
		rs, err := measureNodes(nodes, setup, duration, warmup)
		stop()
		if err != nil {
			return fmt.Errorf("%s: %w", setup.name, err)
		}
		runs = append(runs, rs...)
	}
	report := renderCluster(runs, duration)
	fmt.Print(report)
	if out != "" {
		return mdreport.Replace(out, "## Cluster: three nodes against one", report)
	}
	return nil
}

// clusterKit is what every cluster figure starts from: a scratch
// directory (the caller removes it), the warden binary (-warden, or built
// into it), an exec driver that succeeds, and the keys the nodes share.
func clusterKit(name string) (tmp, bin, okScript, shared string, err error) {
	if tmp, bin, okScript, err = benchKit(name); err != nil {
		return
	}
	shared = filepath.Join(tmp, "shared")
	if b, kerr := exec.Command(bin, "keygen", shared).CombinedOutput(); kerr != nil {
		os.RemoveAll(tmp)
		err = fmt.Errorf("keygen: %v: %s", kerr, b)
	}
	return
}

// benchKit is what every run of warden needs: a temporary directory
// (name its pattern; the caller removes it), the warden binary (-warden's
// or one built into it) and the dispatch script that answers ok. On an
// error the directory is already removed.
func benchKit(name string) (tmp, bin, okScript string, err error) {
	if tmp, err = os.MkdirTemp("", name); err != nil {
		return
	}
	if bin, err = wardenBinary(tmp); err == nil {
		okScript, err = testkit.OKScript(tmp)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return
}

type benchNode struct {
	base string
	cmd  *exec.Cmd
}

func startNodes(bin, okScript, shared, dir string, setup clusterSetup) ([]benchNode, func(), error) {
	type ports struct{ http, peer, client string }
	var ps []ports
	for i := 0; i < setup.nodes; i++ {
		var p ports
		if err := testports.StablePorts(&p.http, &p.peer, &p.client); err != nil {
			return nil, nil, err
		}
		ps = append(ps, p)
	}
	var initial []string
	for i, p := range ps {
		initial = append(initial, fmt.Sprintf("n%d=http://%s", i+1, p.peer))
	}
	var nodes []benchNode
	stop := func() {
		for _, n := range nodes {
			if clusterProfiles != "" {
				_ = n.cmd.Process.Signal(os.Interrupt) // the profile is written as it stops
			} else {
				_ = n.cmd.Process.Kill()
			}
			_ = n.cmd.Wait()
		}
	}
	for i, p := range ps {
		args := []string{"serve", "--listen", p.http, "--data", filepath.Join(dir, fmt.Sprint("n", i+1)),
			"--dispatch", "exec", "--dispatch-command", okScript, "--bootstrap", "exec", "--bootstrap-command", okScript,
			"--pool", fmt.Sprintf("default=%d", clusterConns), "--log-format", "json", "--callback-auth", "shared"}
		if setup.etcd {
			args = append(args, "--node", fmt.Sprint("n", i+1), "--etcd-embed", "--etcd-plaintext", "--etcd-peer-url", "http://"+p.peer,
				"--etcd-client-url", "http://"+p.client, "--etcd-initial-cluster", strings.Join(initial, ","),
				"--seal-key-file", filepath.Join(shared, "seal.key"), "--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"),
				"--cluster-token-file", filepath.Join(shared, "cluster.token"))
		}
		if clusterProfiles != "" && setup.nodes > 1 {
			args = append(args, "--cpu-profile", filepath.Join(clusterProfiles, fmt.Sprintf("n%d.prof", i+1)))
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+callbackToken, "WARDEN_OPERATOR_TOKEN="+operatorToken)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, stop, err
		}
		logf, _ := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		nodes = append(nodes, benchNode{base: "http://" + p.http, cmd: cmd})
	}
	c := &http.Client{Timeout: 5 * time.Second}
	for _, n := range nodes {
		if err := waitReady(c, n.base, time.Minute); err != nil {
			stop()
			return nil, nil, err
		}
	}
	if setup.etcd {
		if err := waitShards(c, nodes); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return nodes, stop, nil
}

// shardMap is a node's view of which node owns each shard.
func shardMap(c *http.Client, base string) (map[int]string, map[string]string, error) {
	req, _ := http.NewRequest("GET", base+"/v1/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var v cluster.View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return nil, nil, err
	}
	owners, urls := map[int]string{}, map[string]string{}
	for _, s := range v.Shards {
		if s.Owner != "" {
			owners[s.Shard] = s.Owner
		}
	}
	for _, m := range v.Members {
		if m.Alive {
			urls[m.Name] = m.URL
		}
	}
	return owners, urls, nil
}

// waitShards waits until the shards have settled on every member (the
// rendezvous share of each), so no move happens while measuring.
func waitShards(c *http.Client, nodes []benchNode) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		owners, urls, err := shardMap(c, nodes[0].base)
		if err == nil && len(owners) == cluster.Shards && len(urls) == len(nodes) {
			names := make([]string, 0, len(urls))
			for n := range urls {
				names = append(names, n)
			}
			sort.Strings(names)
			settled := true
			for s, o := range owners {
				settled = settled && cluster.Owner(s, names) == o
			}
			if settled {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the shards did not settle")
}

// measureNodes loads the nodes path by path and measures each.
// Long: a measurement's script, read top to bottom as it runs.
func measureNodes(nodes []benchNode, setup clusterSetup, duration, warmup time.Duration) ([]clusterRun, error) {
	b := &bench{client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2048, MaxConnsPerHost: 2048}, Timeout: 10 * time.Second},
		base: nodes[0].base, marquee: clusterConns}
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	b.runID = hex.EncodeToString(rid[:])
	for i := 0; i < clusterConns; i++ {
		body := fmt.Sprintf(`{"id":"m-%03d","kind":"tutorial"}`, i)
		if st, err := post(b.client, nodes[i%len(nodes)].base+"/v1/marquees", operatorToken, body, nil); err != nil || st != 201 {
			return nil, fmt.Errorf("create marquee %d: %d %v", i, st, err)
		}
	}
	time.Sleep(time.Second) // every marquee admitted and dispatched (generation 1)
	targets := map[string]func(i int) string{"": nil}
	order := []string{""}
	if len(nodes) > 1 {
		owners, urls, err := shardMap(b.client, nodes[0].base)
		if err != nil {
			return nil, err
		}
		targets = map[string]func(int) string{
			"through any node": func(i int) string { return nodes[i%len(nodes)].base },
			"to each marquee's owner": func(i int) string {
				return urls[owners[cluster.ShardOf("marquee", fmt.Sprintf("m-%03d", i))]]
			},
		}
		order = []string{"through any node", "to each marquee's owner"}
	}
	p := allPaths["terraform"]
	per := map[string][]result{}
	for round := 0; round < rounds; round++ {
		for k := range order {
			name := order[(k+round)%len(order)]
			b.target = targets[name]
			_ = b.load(p, clusterConns, warmup)
			dup, err := sumDuplicates(b.client, nodes)
			if err != nil {
				return nil, err
			}
			cpu0 := nodesCPU(nodes)
			r := b.load(p, clusterConns, duration)
			if r.requests > 0 {
				r.cpuPerReq = (nodesCPU(nodes) - cpu0) / time.Duration(r.requests)
			}
			dup2, err := sumDuplicates(b.client, nodes)
			if err != nil {
				return nil, err
			}
			if dup2 != dup {
				return nil, fmt.Errorf("%.0f requests were answered as duplicates; the load repeated delivery ids", dup2-dup)
			}
			label := setup.name
			if name != "" {
				label += ", " + name
			}
			fmt.Printf("round %d %-70s %8.0f req/s  p50 %-9s p99 %-9s cpu/req %-8s (%d requests, %d errors, 0 duplicates)\n",
				round+1, label, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.cpuPerReq.Round(time.Microsecond), r.requests, r.errors)
			per[label] = append(per[label], r)
		}
	}
	var out []clusterRun
	for _, name := range order {
		label := setup.name
		if name != "" {
			label += ", " + name
		}
		rs := per[label]
		sort.Slice(rs, func(i, j int) bool { return rs[i].rps < rs[j].rps })
		med := rs[len(rs)/2]
		cpus := make([]time.Duration, len(rs))
		for i, r := range rs {
			cpus[i] = r.cpuPerReq
		}
		sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
		med.cpuPerReq = cpus[len(cpus)/2]
		out = append(out, clusterRun{setup: label, result: med})
	}
	return out, nil
}

func sumDuplicates(c *http.Client, nodes []benchNode) (float64, error) {
	var total float64
	for _, n := range nodes {
		d, err := duplicates(c, n.base)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

func nodesCPU(nodes []benchNode) time.Duration {
	var t time.Duration
	for _, n := range nodes {
		t += cpuTime(n.cmd.Process.Pid)
	}
	return t
}

func renderCluster(runs []clusterRun, d time.Duration) string {
	var b strings.Builder
	b.WriteString("## Cluster: three nodes against one\n\n")
	fmt.Fprintf(&b, "Command: `make bench` (`go run ./cmd/warden-bench -cluster -out BENCHMARKS.md`), the durable callback path (shared token) at %d connections, %s per run after a warm-up, %d rounds (median by throughput, median CPU).\n", clusterConns, d, rounds)
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "Run: %s on %s, %s/%s, %d CPUs, %s; every node, every etcd member and the load generator share this machine's CPUs and disk. Every request carries a unique delivery id; the nodes' deduplicated-answer counters did not move.\n\n",
		time.Now().UTC().Format("2006-01-02"), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	b.WriteString("| setup | req/s | p50 | p99 | CPU / request (every node) | errors | throughput vs one node on Pebble |\n|---|---|---|---|---|---|---|\n")
	base := runs[0].result.rps
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.0f | %s | %s | %s | %d | %.2f |\n", r.setup, r.result.rps, r.result.p50.Round(time.Microsecond), r.result.p99.Round(time.Microsecond),
			r.result.cpuPerReq.Round(time.Microsecond), r.result.errors, r.result.rps/base)
	}
	b.WriteString("\n")
	return b.String()
}
