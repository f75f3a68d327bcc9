package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/testports"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// The cluster at scale: n marquees stored in a three-member etcd,
// then three warden nodes started on it. Measured: the store's size on
// disk and as etcd counts it, start-up to ready (every node ready, every
// shard owned where rendezvous puts it), failover of the busiest node
// (SIGKILL until a survivor shows every shard owned by a live node, and
// until a marquee of a moved shard reads), and a steady run of callbacks
// with etcd's size sampled against its quota while its history is
// compacted.

// clusterScaleHeading names the run by its compaction retention: make
// bench runs warden's default and a short one, whose size levels off
// within the ten minutes.
func clusterScaleHeading(compaction time.Duration) string {
	return fmt.Sprintf("## The cluster at scale (D10), etcd history kept %s", compaction)
}

// etcdQuota is etcd's default space quota (the embedded members keep it).
const etcdQuota = 2 << 30

type scaleNode struct {
	name, http, peer, client, dir string
	cmd                           *exec.Cmd
}

type scaleRun struct {
	n                         int
	seed, startup             time.Duration
	diskBytes, dbSize, dbUsed int64
	failover, firstRead       time.Duration
	busiest                   string
	busiestShards             int
	leaseTTL                  time.Duration
	steady                    time.Duration
	compaction                time.Duration
	requests, errors          int
	rps                       float64
	maxDB, maxInUse, endDB    int64
	endInUse                  int64
	rate                      int
	samples                   int
	// warm is the unmeasured start of the steady run: etcd's history
	// window (one compaction retention) fills, and every marquee's
	// deliveries record reaches its bound.
	warm time.Duration
	// floors are one member's db in use just after a compaction to the
	// revision of one retention ago, made by the bench at the start, the
	// middle and the end of the measured run, each with the callbacks
	// acknowledged by then. Between etcd's own compactions the db in use
	// holds the revisions since the last one too, a sawtooth of tens of
	// MiB at this rate, which samples at other moments would read as
	// growth or shrinkage.
	floors [][2]int64
}

// warm is the unmeasured start of the steady run (make bench: one
// compaction retention and a minute).
func runClusterScale(out string, n int, warm, steady, compaction time.Duration, rate int) error {
	tmp, bin, okScript, shared, err := clusterKit("warden-bench-scale")
	if tmp != "" {
		defer os.RemoveAll(tmp)
	}
	if err != nil {
		return err
	}
	nodes, err := scaleNodes(tmp)
	if err != nil {
		return err
	}
	run := scaleRun{n: n, leaseTTL: 3 * time.Second, steady: steady, compaction: compaction, rate: rate, warm: warm}
	if err := seedEtcd(nodes, n, &run); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Printf("seeded %d marquees in %s; %d bytes on disk, etcd db %d (in use %d)\n", n, run.seed.Round(time.Millisecond), run.diskBytes, run.dbSize, run.dbUsed)
	defer func() {
		for _, nd := range nodes {
			if nd.cmd != nil {
				_ = nd.cmd.Process.Kill()
				_ = nd.cmd.Wait()
			}
		}
	}()
	c := &http.Client{Timeout: 5 * time.Second}
	start := time.Now()
	for _, nd := range nodes {
		if err := startScaleNode(bin, okScript, shared, nodes, nd, compaction); err != nil {
			return err
		}
	}
	if err := waitScaleReady(c, nodes, 5*time.Minute); err != nil {
		return err
	}
	run.startup = time.Since(start)
	fmt.Printf("three nodes ready, shards settled, in %s\n", run.startup.Round(time.Millisecond))
	if err := sampleReads(c, nodes, n); err != nil {
		return err
	}
	if err := measureFailover(c, bin, okScript, shared, nodes, n, compaction, &run); err != nil {
		return err
	}
	fmt.Printf("failover of %s (%d shards): every shard owned again in %s, a moved marquee read in %s\n", run.busiest, run.busiestShards, run.failover.Round(time.Millisecond), run.firstRead.Round(time.Millisecond))
	if err := steadyCallbacks(nodes, &run); err != nil {
		return err
	}
	report := renderScale(run)
	fmt.Print(report)
	if out != "" {
		return mdreport.Replace(out, clusterScaleHeading(compaction), report)
	}
	return nil
}

func scaleNodes(tmp string) ([]*scaleNode, error) {
	var nodes []*scaleNode
	for i := 1; i <= 3; i++ {
		nd := &scaleNode{name: fmt.Sprint("n", i), dir: filepath.Join(tmp, fmt.Sprint("n", i))}
		if err := testports.StablePorts(&nd.http, &nd.peer, &nd.client); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(nd.dir, 0o700); err != nil {
			return nil, err
		}
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

func initialCluster(nodes []*scaleNode) string {
	var parts []string
	for _, nd := range nodes {
		parts = append(parts, nd.name+"=http://"+nd.peer)
	}
	return strings.Join(parts, ",")
}

// seedEtcd starts the three members alone (no warden yet), on the
// directories the nodes will run them from, and writes n marquees as
// populate does: at rest, every hundredth stuck with a wake entry.
func seedEtcd(nodes []*scaleNode, n int, run *scaleRun) error {
	var wg sync.WaitGroup
	members := make([]*etcdembed.Member, len(nodes))
	errs := make([]error, len(nodes))
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members[i], errs[i] = etcdembed.Start(etcdembed.Config{Name: nd.name, Dir: filepath.Join(nd.dir, "etcd"), PeerURL: "http://" + nd.peer,
				ClientURL: "http://" + nd.client, InitialCluster: initialCluster(nodes), StartTimeout: time.Minute})
		}()
	}
	wg.Wait()
	defer func() {
		for _, m := range members {
			if m != nil {
				m.Close()
			}
		}
	}()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + nodes[0].client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	st := persistence.OpenBackend(persistence.OpenEtcd(cl, 30*time.Second), nil)
	now := time.Now()
	start := time.Now()
	const perTxn = 25 // a marquee is its record and maybe a wake entry: within etcd's 100 operations
	b := st.NewBatch()
	for i := 0; i < n; i++ {
		record.SeedMarquee(b, nil, restingMarquee(fmt.Sprintf("s-%07d", i), i, now))
		if (i+1)%perTxn == 0 || i == n-1 {
			if err := b.Commit(); err != nil {
				return err
			}
			b = st.NewBatch()
		}
	}
	b.Discard()
	run.seed = time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cl.Status(ctx, "http://"+nodes[0].client)
	if err != nil {
		return err
	}
	run.dbSize, run.dbUsed = s.DbSize, s.DbSizeInUse
	for _, m := range members {
		m.Close()
	}
	members = nil
	for _, nd := range nodes {
		run.diskBytes += dirBytes(filepath.Join(nd.dir, "etcd"))
	}
	return nil
}

// restingMarquee is the i-th marquee the scale figures seed: provisioned
// and at rest, except every hundredth, stuck provisioning with a retry
// overdue (its wake-index entry in the past).
func restingMarquee(id string, i int, now time.Time) record.Marquee {
	s := marquee.State{ID: id, Kind: marquee.Tutorial, Pool: "default", Serving: marquee.Active,
		Lifecycle: marquee.Provisioned, Progress: marquee.AppDeploying, Generation: 3, DispatchedGeneration: 3, ConnectionGeneration: 3,
		Connection: &marquee.Connection{Host: "203.0.113.7", Port: 22, User: "root", SSHPrivateKey: "k", FreeDomain: "x.example.net"},
		Attempt:    &marquee.Attempt{Generation: 3, Action: marquee.ActionApply, Dispatch: marquee.DispatchSent, DispatchedAt: now.Add(-time.Hour)},
		CreatedAt:  now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour)}
	if i%100 != 0 {
		return record.Marquee{State: s}
	}
	s.Serving, s.Lifecycle, s.Connection, s.ConnectionGeneration = marquee.Disabled, marquee.Provisioning, nil, 0
	s.Progress = marquee.Queued
	s.Attempt.DispatchedAt = now.Add(-10 * time.Minute)
	return record.Marquee{State: s, WakeAt: now.Add(-5 * time.Minute)}
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func startScaleNode(bin, okScript, shared string, nodes []*scaleNode, nd *scaleNode, compaction time.Duration) error {
	args := []string{"serve", "--listen", nd.http, "--data", nd.dir,
		"--dispatch", "exec", "--dispatch-command", okScript, "--bootstrap", "exec", "--bootstrap-command", okScript,
		"--pool", "default=10000", "--log-format", "json", "--callback-auth", "shared",
		"--node", nd.name, "--etcd-embed", "--etcd-plaintext", "--etcd-peer-url", "http://" + nd.peer, "--etcd-client-url", "http://" + nd.client,
		"--etcd-initial-cluster", initialCluster(nodes), "--etcd-compaction-retention", compaction.String(),
		"--seal-key-file", filepath.Join(shared, "seal.key"), "--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"),
		"--cluster-token-file", filepath.Join(shared, "cluster.token")}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+callbackToken, "WARDEN_OPERATOR_TOKEN="+operatorToken)
	logf, err := os.OpenFile(filepath.Join(nd.dir, "warden.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	nd.cmd = cmd
	return nil
}

func benchNodesOf(nodes []*scaleNode) []benchNode {
	var out []benchNode
	for _, nd := range nodes {
		if nd.cmd != nil {
			out = append(out, benchNode{base: "http://" + nd.http, cmd: nd.cmd})
		}
	}
	return out
}

func waitScaleReady(c *http.Client, nodes []*scaleNode, within time.Duration) error {
	for _, nd := range nodes {
		if err := waitReady(c, "http://"+nd.http, within); err != nil {
			return fmt.Errorf("%s: %w (log: %s)", nd.name, err, testkit.Tail(filepath.Join(nd.dir, "warden.log"), 5))
		}
	}
	return waitShards(c, benchNodesOf(nodes))
}

// sampleReads reads a hundred seeded marquees spread over the key space
// through the nodes: the store the nodes serve is the one seeded.
func sampleReads(c *http.Client, nodes []*scaleNode, n int) error {
	for k := 0; k < 100; k++ {
		id := fmt.Sprintf("s-%07d", k*n/100)
		if st, err := get(c, "http://"+nodes[k%len(nodes)].http+"/v1/marquees/"+id); err != nil || st != 200 {
			return fmt.Errorf("read %s: %d %v", id, st, err)
		}
	}
	return nil
}

func get(c *http.Client, url string) (int, error) {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// measureFailover kills the node owning the most shards and times the
// takeover, then restarts it and waits for the shards to settle again.
func measureFailover(c *http.Client, bin, okScript, shared string, nodes []*scaleNode, n int, compaction time.Duration, run *scaleRun) error {
	owners, _, err := shardMap(c, "http://"+nodes[0].http)
	if err != nil {
		return err
	}
	count := map[string]int{}
	for _, o := range owners {
		count[o]++
	}
	names := make([]string, 0, len(count))
	for name := range count {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		return count[names[i]] > count[names[j]] || count[names[i]] == count[names[j]] && names[i] < names[j]
	})
	run.busiest, run.busiestShards = names[0], count[names[0]]
	var victim, survivor *scaleNode
	for _, nd := range nodes {
		if nd.name == run.busiest {
			victim = nd
		} else if survivor == nil {
			survivor = nd
		}
	}
	moved := ""
	for i := 0; i < n && moved == ""; i++ {
		id := fmt.Sprintf("s-%07d", i)
		if owners[cluster.ShardOf("marquee", id)] == victim.name {
			moved = id
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	killed := time.Now()
	_ = victim.cmd.Wait()
	victim.cmd = nil
	for {
		if time.Since(killed) > time.Minute {
			return fmt.Errorf("the shards of %s were not taken over within a minute", victim.name)
		}
		owners, urls, err := shardMap(c, "http://"+survivor.http)
		if err == nil && len(owners) == cluster.Shards && urls[victim.name] == "" {
			live := true
			for _, o := range owners {
				live = live && o != victim.name
			}
			if live {
				run.failover = time.Since(killed)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if st, err := get(c, "http://"+survivor.http+"/v1/marquees/"+moved); err == nil && st == 200 {
			run.firstRead = time.Since(killed)
			break
		}
		if time.Since(killed) > time.Minute {
			return fmt.Errorf("%s not readable within a minute of the kill", moved)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := startScaleNode(bin, okScript, shared, nodes, victim, compaction); err != nil {
		return err
	}
	return waitScaleReady(c, nodes, 5*time.Minute)
}

// steadyCallbacks sends callbacks to the three nodes at run.rate a second
// for run.steady (each with a delivery id of its own), sampling every
// member's size every ten seconds.
// Long: a measurement's script, read top to bottom as it runs.
func steadyCallbacks(nodes []*scaleNode, run *scaleRun) error {
	bn := benchNodesOf(nodes)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}, Timeout: 10 * time.Second}
	for i := 0; i < clusterConns; i++ {
		body := fmt.Sprintf(`{"id":"m-%03d","kind":"tutorial"}`, i)
		if st, err := post(c, bn[i%len(bn)].base+"/v1/marquees", operatorToken, body, nil); err != nil || st != 201 {
			return fmt.Errorf("create marquee %d: %d %v", i, st, err)
		}
	}
	time.Sleep(2 * time.Second) // admitted and dispatched
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + nodes[0].client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	dup, err := sumDuplicates(c, bn)
	if err != nil {
		return err
	}
	var rid [6]byte
	_, _ = rand.Read(rid[:])
	runID := hex.EncodeToString(rid[:])
	work := make(chan int, 4096)
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < clusterConns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				body := fmt.Sprintf(`{"marquee_id":"m-%03d","verb":"step","generation":1,"step":"vm_starting"}`, n%clusterConns)
				st, err := post(c, bn[n%len(bn)].base+"/v1/webhooks/terraform", callbackToken, body, []string{"Webhook-Id", fmt.Sprintf("steady-%s-%d", runID, n)})
				if err != nil || st != 200 {
					failed.Add(1)
					continue
				}
				ok.Add(1)
			}
		}()
	}
	type revAt struct {
		t   time.Time
		rev int64
	}
	var revs []revAt
	sample := func(at time.Duration) error {
		for _, nd := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s, err := cl.Status(ctx, "http://"+nd.client)
			cancel()
			if err != nil {
				return err
			}
			run.maxDB, run.maxInUse = max(run.maxDB, s.DbSize), max(run.maxInUse, s.DbSizeInUse)
			run.endDB, run.endInUse = s.DbSize, s.DbSizeInUse
			if nd == nodes[0] {
				revs = append(revs, revAt{time.Now(), s.Header.Revision})
			}
		}
		run.samples++
		fmt.Printf("steady %s: %d ok, %d errors; etcd db %d MiB (in use %d MiB, %d bytes)\n", at.Round(time.Second), ok.Load(), failed.Load(), run.endDB>>20, run.endInUse>>20, run.endInUse)
		return nil
	}
	if err := sample(0); err != nil {
		return err
	}
	// revsBefore is the store's revision at the last sample before t:
	// compacting to it keeps the history etcd's own compactor keeps (a
	// run shorter than the retention, as the test's, compacts to its
	// first sample).
	revsBefore := func(t time.Time) int64 {
		rev := revs[0].rev
		for _, r := range revs {
			if !r.t.After(t) {
				rev = r.rev
			}
		}
		return rev
	}
	start := time.Now()
	floorAt := []time.Duration{run.warm, run.warm + run.steady/2} // the last is taken after the loop
	floor := func(now time.Time) error {
		at, err := compactedFloor(cl, nodes[len(nodes)-1], revsBefore(now.Add(-run.compaction)), &ok)
		run.floors = append(run.floors, at)
		return err
	}
	tick := time.NewTicker(10 * time.Millisecond)
	next, sent := start.Add(10*time.Second), 0
	for now := range tick.C {
		elapsed := now.Sub(start)
		if elapsed >= run.warm+run.steady {
			break
		}
		for due := int(elapsed.Seconds() * float64(run.rate)); sent < due; sent++ {
			work <- sent
		}
		if now.After(next) {
			if err := sample(elapsed); err != nil {
				return err
			}
			next = next.Add(10 * time.Second)
			if len(floorAt) > 0 && elapsed >= floorAt[0] {
				floorAt = floorAt[1:]
				if err := floor(now); err != nil {
					return err
				}
			}
		}
	}
	tick.Stop()
	if err := floor(time.Now()); err != nil {
		return err
	}
	close(work)
	wg.Wait()
	if err := sample(time.Since(start)); err != nil {
		return err
	}
	run.requests, run.errors = int(ok.Load()-run.floors[0][0]), int(failed.Load())
	run.rps = float64(ok.Load()) / (run.warm + run.steady).Seconds()
	dup2, err := sumDuplicates(c, bn)
	if err != nil {
		return err
	}
	if dup2 != dup {
		return fmt.Errorf("%.0f requests were answered as duplicates; the load repeated delivery ids", dup2-dup)
	}
	return nil
}

func renderScale(r scaleRun) string {
	var b strings.Builder
	b.WriteString(clusterScaleHeading(r.compaction) + "\n\n")
	fmt.Fprintf(&b, "Command: `make bench` (`go run ./cmd/warden-bench -cluster-scale %d -steady %s -rate %d -compaction %s -out BENCHMARKS.md`). "+
		"Three warden nodes with embedded etcd members on this machine (%d CPUs, %s), `--lease-ttl %s`, `--etcd-compaction-retention %s`; "+
		"%d marquees seeded into the members before the nodes start (the records `-scale` seeds: at rest, every hundredth stuck with a wake entry).\n\n",
		r.n, r.steady, r.rate, r.compaction, runtime.NumCPU(), runtime.Version(), r.leaseTTL, r.compaction, r.n)
	b.WriteString("| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| seeding %d marquees (25 a transaction, one client) | %s |\n", r.n, r.seed.Round(time.Millisecond))
	fmt.Fprintf(&b, "| store on disk, three members together (etcd directories: db, WAL, snapshots) | %.1f MiB |\n", float64(r.diskBytes)/(1<<20))
	fmt.Fprintf(&b, "| etcd's db, one member (size / in use) | %.1f / %.1f MiB |\n", float64(r.dbSize)/(1<<20), float64(r.dbUsed)/(1<<20))
	fmt.Fprintf(&b, "| start-up to ready (three processes started until every node is ready and every shard owned where rendezvous puts it) | %s |\n", r.startup.Round(time.Millisecond))
	bound := r.leaseTTL + time.Second
	verdict := "within"
	if r.failover > bound {
		verdict = "over"
	}
	fmt.Fprintf(&b, "| failover of the busiest node (%s, %d of %d shards), SIGKILL until a survivor shows every shard owned by a live node | %s (%s C5's bound, %s) |\n",
		r.busiest, r.busiestShards, cluster.Shards, r.failover.Round(time.Millisecond), verdict, bound)
	fmt.Fprintf(&b, "| ... until a seeded marquee of a moved shard reads (its actor loaded from etcd by the new owner) | %s |\n", r.firstRead.Round(time.Millisecond))
	fmt.Fprintf(&b, "| steady callbacks at %d a second to %d marquees through the three nodes, %s unmeasured then %s measured (a delivery id each) | %.0f req/s answered, %d requests measured, %d errors, 0 duplicates |\n", r.rate, clusterConns, r.warm, r.steady, r.rps, r.requests, r.errors)
	fmt.Fprintf(&b, "| etcd's db during the steady run, largest of %d samples of every member (size / in use) | %.1f / %.1f MiB |\n", r.samples, float64(r.maxDB)/(1<<20), float64(r.maxInUse)/(1<<20))
	fmt.Fprintf(&b, "| ... at the end | %.1f / %.1f MiB |\n", float64(r.endDB)/(1<<20), float64(r.endInUse)/(1<<20))
	fmt.Fprintf(&b, "| etcd's quota (the default) | %d MiB: the largest db was %.1f%% of it |\n", etcdQuota>>20, 100*float64(r.maxDB)/etcdQuota)
	if n := len(r.floors); n >= 2 {
		var fit lineFit
		for _, f := range r.floors {
			fit.add(float64(f[0]), float64(f[1]))
		}
		first, last := r.floors[0], r.floors[n-1]
		per := float64(last[1]-first[1]) / float64(last[0]-first[0])
		fmt.Fprintf(&b, "| growth of the db in use per acknowledged callback, just after a compaction to one retention ago (at the start, middle and end of the measured run; one member): least squares / first to last | %.0f / %.0f bytes |\n", fit.slope(), per)
		fmt.Fprintf(&b, "| ... the db in use just after the first and the last of them | %.1f / %.1f MiB |\n", float64(first[1])/(1<<20), float64(last[1])/(1<<20))
	} else {
		fmt.Fprintf(&b, "| growth of the db in use per acknowledged callback | not measured: %d floor in the measured run |\n", n)
	}
	b.WriteString("\n")
	return b.String()
}

// lineFit is a least-squares line through (x, y) points: the db's growth
// per callback, which one compaction more or less at either end would
// move if only the first and last samples were taken.
type lineFit struct {
	n                int
	sx, sy, sxx, sxy float64
}

func (f *lineFit) add(x, y float64) {
	f.n++
	f.sx, f.sy, f.sxx, f.sxy = f.sx+x, f.sy+y, f.sxx+x*x, f.sxy+x*y
}

func (f *lineFit) slope() float64 {
	d := float64(f.n)*f.sxx - f.sx*f.sx
	if f.n < 2 || d == 0 {
		return 0
	}
	return (float64(f.n)*f.sxy - f.sx*f.sy) / d
}

// compactedFloor compacts the store to rev (physically: the backend has
// dropped the old revisions when it returns) and reads the db in use of
// nd, the lowest of a few reads over the next second and a half while
// bolt frees the pages: what the store holds then is the live records
// and one retention of history. It returns the callbacks acknowledged
// by then and that size.
func compactedFloor(cl *clientv3.Client, nd *scaleNode, rev int64, ok *atomic.Int64) ([2]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return [2]int64{}, fmt.Errorf("compact to %d: %w", rev, err)
	}
	low := [2]int64{0, math.MaxInt64}
	for range 6 {
		s, err := cl.Status(ctx, "http://"+nd.client)
		if err != nil {
			return [2]int64{}, err
		}
		if s.DbSizeInUse < low[1] {
			low = [2]int64{ok.Load(), s.DbSizeInUse}
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Printf("compacted to %d: %d acknowledged, db in use %d bytes\n", rev, low[0], low[1])
	return low, nil
}
