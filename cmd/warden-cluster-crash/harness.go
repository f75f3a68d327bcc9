package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/cmd/internal/previewworld"
	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/linear"
	"github.com/wardenhq/warden/internal/testports"
)

// Options of one run.
type Options struct {
	Duration  time.Duration
	MinKills  int
	MinPauses int
	// EveryFault runs until each kind of fault happened at least once (a
	// pause shorter than the detector, one between it and the lease, a
	// member added and removed, a rolling restart), past Duration if need
	// be.
	EveryFault bool
	Seed       int64
	Binary     string
	Log        io.Writer
	// LeaseTTL is the nodes' --lease-ttl; zero is warden's default, 3 s.
	LeaseTTL time.Duration
	// StaleAfter is the nodes' --stale-after (zero: 3 s, so that the runs'
	// stuck work is retried within them, M21).
	StaleAfter time.Duration
}

// Report is what a run measured.
type Report struct {
	Seed            int64
	Kills           int
	Pauses          int
	RollingRestarts int
	MembersAdded    int
	MembersRemoved  int
	Marquees        int
	Envs            int
	Dispatches      int
	AppliedChecked  int
	// HistoriesReplayed is how many marquees' histories verify replayed
	// to their records; OtherProblems what else it reported.
	HistoriesReplayed int
	OtherProblems     int
	// Ops counts client operations by result: ok, failed, unknown.
	Ops map[string]int
	// Revisions is how many revisions of etcd's history were checked;
	// FencedTxns how many transactions carried an epoch.
	Revisions  int
	FencedTxns int
	// RouteGenerations is how many branch route generations were given
	// out in the history (each checked to grow, I14).
	RouteGenerations int
	MaxAdmit         int
	Failovers        []Failover
	// Pauses by length: shorter than the failure detector, between it and
	// the lease, longer than the lease.
	ShortPauses, DetectorPauses int
	// LeaderPauses are the pauses of etcd's Raft leader (owner or not).
	LeaderPauses int
	// Revocations of a silent member's lease, leases found lost, and
	// revocations the detector's bound held back, from the nodes' logs.
	Revocations, LeasesLost, RevocationsHeld int
	// LapsesRecovered: renewals after a lease's local deadline, whose
	// shards the node recovered again.
	LapsesRecovered int
	// GroupedTxns are the transactions that carried several entities'
	// commits (C15), and GroupedCommits the commits in them.
	GroupedTxns, GroupedCommits int
	// LinearOps is how many register operations were checked for
	// linearizability (per marquee, with porcupine).
	LinearOps int
	TTL       time.Duration
	Elapsed   time.Duration
}

// Failover is one owner kill: how long until every shard had a live owner
// again, and whether the victim was also etcd's Raft leader (then an
// election, and etcd renewing every lease for the new leader's sake, come
// before its lease can expire).
type Failover struct {
	Took   time.Duration
	Leader bool
}

// failoverTimes are the kills' times, of every kill or of those whose
// victim was (or was not) etcd's leader.
func (r Report) failoverTimes(keep func(Failover) bool) []time.Duration {
	var out []time.Duration
	for _, f := range r.Failovers {
		if keep(f) {
			out = append(out, f.Took)
		}
	}
	return out
}

func (r Report) String() string {
	all := r.failoverTimes(func(Failover) bool { return true })
	leader := r.failoverTimes(func(f Failover) bool { return f.Leader })
	others := r.failoverTimes(func(f Failover) bool { return !f.Leader })
	p50, worst := percentile(all, 50), percentile(all, 100)
	return fmt.Sprintf("seed=%d lease-ttl=%s owner-kills=%d leader-pauses=%d pauses-past-lease=%d pauses-past-detector=%d short-pauses=%d rolling-restarts=%d members-added=%d members-removed=%d marquees=%d environments=%d dispatches=%d "+
		"applied-callbacks-checked=%d histories-replayed=%d verify-other-problems=%d ops-ok=%d ops-failed=%d ops-unknown=%d linearizable-ops=%d revisions-checked=%d fenced-transactions=%d grouped-transactions=%d (of %d commits) route-generations=%d most-reserved=%d/%d "+
		"revocations=%d leases-lost=%d revocations-held=%d lapses-recovered=%d "+
		"failover-p50=%s failover-max=%s (of which etcd-leader kills=%d, their max=%s; the others' max=%s) elapsed=%s",
		r.Seed, r.TTL, r.Kills, r.LeaderPauses, r.Pauses, r.DetectorPauses, r.ShortPauses, r.RollingRestarts, r.MembersAdded, r.MembersRemoved, r.Marquees, r.Envs, r.Dispatches, r.AppliedChecked, r.HistoriesReplayed, r.OtherProblems,
		r.Ops["ok"], r.Ops["failed"], r.Ops["unknown"], r.LinearOps, r.Revisions, r.FencedTxns, r.GroupedTxns, r.GroupedCommits, r.RouteGenerations, r.MaxAdmit, poolLimit,
		r.Revocations, r.LeasesLost, r.RevocationsHeld, r.LapsesRecovered,
		p50.Round(time.Millisecond), worst.Round(time.Millisecond), len(leader), percentile(leader, 100).Round(time.Millisecond),
		percentile(others, 100).Round(time.Millisecond), r.Elapsed.Round(time.Second))
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, (len(s)-1)*p/100)]
}

const (
	cbToken   = "cluster-callback-token"
	opToken   = "cluster-operator-token"
	poolLimit = 3
	// defaultTTL is warden's own --lease-ttl default.
	defaultTTL = 3 * time.Second
	// detector is warden's failure detector (a second of silence), which
	// the pauses fall either side of.
	detector = time.Second
)

type node struct {
	name                 string
	httpAddr, peer, cURL string
	dir                  string
	cmd                  *exec.Cmd
	exited               chan struct{}
	up                   bool // started and not killed
}

type harness struct {
	o      Options
	rnd    *rand.Rand
	rndMu  sync.Mutex
	dir    string
	bin    string
	shared string
	// previewBin is the reference environment driver (examples/preview).
	previewBin string
	gh         *httptest.Server
	client     *http.Client
	stop       atomic.Bool
	wg         sync.WaitGroup

	nodesMu sync.Mutex
	nodes   []*node

	dispatches testkit.Dispatches

	mu      sync.Mutex
	applied map[string][]string
	created []string
	envs    []*previewworld.Env
	// pendingEnv is a creation asked whose outcome is unknown.
	pendingEnv *previewworld.Env
	ops        map[string]int
	seq        atomic.Uint64
	logMu      sync.Mutex

	ttl time.Duration
	reg *linear.History
	// resumed is the node last resumed from a pause, until resumedUntil:
	// the register clients ask it more than the others.
	resumed      *node
	resumedUntil time.Time
}

func (h *harness) logf(format string, args ...any) {
	if h.o.Log == nil {
		return
	}
	h.logMu.Lock()
	defer h.logMu.Unlock()
	fmt.Fprintf(h.o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func (h *harness) intn(n int) int {
	h.rndMu.Lock()
	defer h.rndMu.Unlock()
	return h.rnd.Intn(n)
}

// freeAddr is a port a node keeps across its restarts: one the kernel
// never hands to anything else while the node is down.
func freeAddr() (string, error) { return testports.StablePort() }

// newHarness is a harness with nothing started yet.
func newHarness(o Options) *harness {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = defaultTTL
	}
	if o.StaleAfter == 0 {
		o.StaleAfter = 3 * time.Second
	}
	return &harness{o: o, rnd: rand.New(rand.NewSource(o.Seed)), ttl: o.LeaseTTL, reg: linear.NewHistory(time.Now()),
		applied: map[string][]string{}, ops: map[string]int{}, client: &http.Client{Timeout: 5 * time.Second}}
}

// up builds what a run needs and starts three nodes, each embedding an
// etcd member, until every shard is owned.
func (h *harness) up() (err error) {
	if h.dir, err = os.MkdirTemp("", "warden-cluster"); err != nil {
		return err
	}
	if h.bin = h.o.Binary; h.bin == "" {
		if h.bin, err = testkit.BuildWarden(h.dir); err != nil {
			return err
		}
	}
	h.shared = filepath.Join(h.dir, "shared")
	if out, err := exec.Command(h.bin, "keygen", h.shared).CombinedOutput(); err != nil {
		return fmt.Errorf("keygen: %v: %s", err, out)
	}
	if h.previewBin, err = previewworld.BuildDriver(h.dir); err != nil {
		return err
	}
	h.gh = httptest.NewServer(http.HandlerFunc(h.github))
	for i := 1; i <= 4; i++ { // n4 is the member added and removed
		n := &node{name: fmt.Sprintf("n%d", i), dir: filepath.Join(h.dir, fmt.Sprintf("n%d", i))}
		for _, p := range []*string{&n.httpAddr, &n.peer, &n.cURL} {
			if *p, err = freeAddr(); err != nil {
				return err
			}
		}
		h.nodes = append(h.nodes, n)
	}
	initial := h.initialCluster(3)
	for _, n := range h.nodes[:3] {
		if err := h.start(n, initial, false); err != nil {
			return err
		}
	}
	for _, n := range h.nodes[:3] {
		if err := h.waitReady(n, time.Minute); err != nil {
			return err
		}
	}
	if err := h.waitOwned(nil, 20*time.Second); err != nil {
		return err
	}
	h.logf("cluster up: %s", initial)
	return nil
}

// close stops everything up started; on a failure the nodes' logs are
// kept and the error says where.
func (h *harness) close(err error) error {
	h.killAll()
	if h.previewBin != "" {
		previewworld.StopApps(h.previewDir())
	}
	if h.gh != nil {
		h.gh.Close()
	}
	if h.dir == "" {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w\n(the nodes' logs are kept in %s)", err, h.dir)
	}
	os.RemoveAll(h.dir)
	return nil
}

// Run runs one fault-injection test of a three-node cluster.
// Long: the fault-injection test's script, read top to bottom as it runs.
func Run(o Options) (rep Report, err error) {
	start := time.Now()
	h := newHarness(o)
	defer func() { err = h.close(err) }() // last: the report below reads the nodes' logs first
	rep = Report{Seed: o.Seed, TTL: h.ttl}
	defer func() {
		h.mu.Lock()
		rep.Marquees, rep.Ops = len(h.created), maps.Clone(h.ops)
		rep.Dispatches = h.dispatches.Total()
		h.mu.Unlock()
		rep.Revocations, rep.LeasesLost, rep.RevocationsHeld, rep.LapsesRecovered = h.detectorCounts()
		rep.Elapsed = time.Since(start)
	}()
	if err := h.up(); err != nil {
		return rep, err
	}
	if err := h.createRegisters(); err != nil {
		return rep, err
	}

	h.wg.Add(2 + registerClients)
	go h.operators()
	go h.envOperators()
	for c := range registerClients {
		go h.registerClient(c)
	}

	deadline := time.Now().Add(o.Duration)
	// Every kind of fault at least once, however slowly the machine goes:
	// a short run on a loaded machine ended before its first pause shorter
	// than the detector (round 13).
	owed := func() bool {
		every := o.EveryFault && (rep.ShortPauses == 0 || rep.DetectorPauses == 0 || rep.MembersAdded == 0 || rep.RollingRestarts == 0)
		return rep.Kills < o.MinKills || rep.Pauses < o.MinPauses || every
	}
	for round := 0; time.Now().Before(deadline) || owed(); round++ {
		time.Sleep(time.Duration(300+h.intn(700)) * time.Millisecond)
		var err error
		switch {
		case round == 5:
			err = h.addAndRemoveMember(&rep)
		case round%8 == 6:
			err = h.pauseLeader(&rep, h.ttl+2*time.Second)
		case round%4 == 2:
			err = h.pauseOwner(&rep, h.ttl+time.Second)
		case round%4 == 1 && round%8 == 1:
			err = h.pauseOwner(&rep, detector+h.ttl/4) // past the detector, short of the lease
		case round%4 == 1:
			err = h.pauseOwner(&rep, detector/2)
		case round%13 == 8:
			err = h.rollingRestart(&rep)
		default:
			err = h.killOwner(&rep)
		}
		if err != nil {
			return rep, fmt.Errorf("round %d: %w", round, err)
		}
		if !owed() && time.Now().After(deadline) {
			break
		}
	}
	// Quiet phase: no faults, no new work; workflows finish.
	h.stop.Store(true)
	h.wg.Wait()
	if err := h.waitOwned(nil, 20*time.Second); err != nil {
		return rep, err
	}
	time.Sleep(2 * time.Second)
	if err := h.settleEnvs(&rep); err != nil {
		return rep, fmt.Errorf("environments after the quiet phase: %w", err)
	}
	ops := h.reg.Operations()
	rep.LinearOps = len(ops)
	if err := linear.Check(ops, linear.Active, time.Minute); err != nil {
		return rep, fmt.Errorf("C4: %w", err)
	}
	// A liveness bound missed (a failover past C5's bound, on a machine
	// loaded past its cores) is reported after the safety checks, which
	// run whatever it found: a run of a thousand faults is not thrown away
	// for want of its verdicts on what was acknowledged.
	detected := h.checkDetector(&rep)
	if err := h.check(&rep); err != nil {
		return rep, errors.Join(err, detected)
	}
	return rep, detected
}

func (h *harness) initialCluster(n int) string {
	var parts []string
	for _, nd := range h.nodes[:n] {
		parts = append(parts, nd.name+"=http://"+nd.peer)
	}
	return strings.Join(parts, ",")
}

func (h *harness) start(n *node, initial string, join bool) error {
	args := []string{"serve", "--node", n.name, "--listen", n.httpAddr, "--data", n.dir,
		"--etcd-embed", "--etcd-plaintext", "--etcd-peer-url", "http://" + n.peer, "--etcd-client-url", "http://" + n.cURL, "--etcd-initial-cluster", initial,
		// The history check replays etcd's history from its first
		// revision: none of it may be compacted during a run.
		"--etcd-compaction-retention", "24h",
		"--seal-key-file", filepath.Join(h.shared, "seal.key"), "--callback-signing-key-file", filepath.Join(h.shared, "callback-signing.key"),
		"--cluster-token-file", filepath.Join(h.shared, "cluster.token"), "--lease-ttl", h.ttl.String(),
		"--dispatch", "github", "--github-api-url", h.gh.URL, "--github-repo", "acme/infra",
		"--bootstrap", "exec", "--bootstrap-command", "true", "--pool", fmt.Sprintf("default=%d", poolLimit),
		"--callback-auth", "shared", "--stale-after", h.o.StaleAfter.String(), "--retry-backoff", "1s,1s,1s", "--provisioning-timeout", "1m",
		"--log-format", "json", "--shutdown-grace", "5s"}
	if join {
		args = append(args, "--etcd-join")
	}
	args = append(args, h.envArgs()...)
	cmd := exec.Command(h.bin, args...)
	cmd.Env = append(os.Environ(), "WARDEN_CALLBACK_TOKEN="+cbToken, "WARDEN_OPERATOR_TOKEN="+opToken, "WARDEN_GITHUB_TOKEN=gh",
		"WARDEN_PREVIEW_DIR="+h.previewDir())
	logf, err := os.OpenFile(filepath.Join(h.dir, n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	h.nodesMu.Lock()
	n.cmd, n.exited, n.up = cmd, exited, true
	h.nodesMu.Unlock()
	return nil
}

func (h *harness) waitReady(n *node, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if st, _, err := h.do(n, "GET", "/readyz", "", nil, ""); err == nil && st == 200 {
			return nil
		}
		select {
		case <-n.exited:
			return fmt.Errorf("%s exited while starting (see %s.log)", n.name, n.name)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %s", n.name, within)
}

func (h *harness) killAll() {
	h.nodesMu.Lock()
	defer h.nodesMu.Unlock()
	for _, n := range h.nodes {
		if n.cmd != nil && n.up {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
}

// live is the nodes started and not killed, in order.
func (h *harness) live() []*node {
	h.nodesMu.Lock()
	defer h.nodesMu.Unlock()
	var out []*node
	for _, n := range h.nodes {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

func (h *harness) anyLive(except *node) *node {
	nodes := h.live()
	var pick []*node
	for _, n := range nodes {
		if n != except {
			pick = append(pick, n)
		}
	}
	if len(pick) == 0 {
		return nil
	}
	return pick[h.intn(len(pick))]
}

func (h *harness) do(n *node, method, path, token string, body any, delivery string) (int, map[string]any, error) {
	return testkit.Do(h.client, "http://"+n.httpAddr, method, path, token, body, delivery)
}

// record files one client operation under Jepsen's three outcomes: ok (an
// answer that says it happened), failed (an answer that says it did not),
// unknown (no answer, or 5xx: it may or may not have happened).
func (h *harness) record(st int, err error) string {
	res := "unknown"
	switch {
	case err == nil && st >= 200 && st < 300:
		res = "ok"
	case err == nil && st >= 400 && st < 500:
		res = "failed"
	}
	h.mu.Lock()
	h.ops[res]++
	h.mu.Unlock()
	return res
}

// view is one node's /v1/cluster.
type view struct {
	Members []struct {
		Name  string `json:"name"`
		Alive bool   `json:"alive"`
	} `json:"members"`
	Shards []struct {
		Shard int    `json:"shard"`
		Owner string `json:"owner"`
		Epoch int64  `json:"epoch"`
	} `json:"shards"`
}

func (h *harness) clusterView(n *node) (view, error) {
	req, _ := http.NewRequest("GET", "http://"+n.httpAddr+"/v1/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := h.client.Do(req)
	if err != nil {
		return view{}, err
	}
	defer resp.Body.Close()
	var v view
	if resp.StatusCode != 200 {
		return v, fmt.Errorf("/v1/cluster: %d", resp.StatusCode)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

// waitOwned waits until a live node's view has every shard owned by a live
// node other than gone.
func (h *harness) waitOwned(gone *node, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if h.allOwned(gone) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("shards not all owned by live nodes within %s", within)
}

func (h *harness) allOwned(gone *node) bool {
	asker := h.anyLive(gone)
	if asker == nil {
		return false
	}
	v, err := h.clusterView(asker)
	if err != nil || len(v.Shards) != cluster.Shards {
		return false
	}
	live := map[string]bool{}
	for _, n := range h.live() {
		if n != gone {
			live[n.name] = true
		}
	}
	for _, s := range v.Shards {
		if !live[s.Owner] {
			return false
		}
	}
	return true
}

// busiestOwner is the live node owning the shard that holds the most
// marquees created so far.
func (h *harness) busiestOwner() (*node, int, error) {
	// Shards may move between two looks (a resumed node rejoining takes
	// some back): look again until the busiest shard's owner is live.
	var lastErr error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		n, shard, err := h.busiestOwnerOnce()
		if err == nil {
			return n, shard, nil
		}
		lastErr = err
	}
	return nil, 0, lastErr
}

func (h *harness) busiestOwnerOnce() (*node, int, error) {
	if err := h.waitOwned(nil, 20*time.Second); err != nil {
		return nil, 0, err
	}
	h.mu.Lock()
	count := map[int]int{}
	for _, id := range h.created {
		count[cluster.ShardOf("marquee", id)]++
	}
	h.mu.Unlock()
	asker := h.anyLive(nil)
	v, err := h.clusterView(asker)
	if err != nil {
		return nil, 0, err
	}
	best, owner := -1, ""
	for _, s := range v.Shards {
		if best < 0 || count[s.Shard] > count[best] {
			best, owner = s.Shard, s.Owner
		}
	}
	for _, n := range h.live() {
		if n.name == owner {
			return n, best, nil
		}
	}
	return nil, 0, fmt.Errorf("shard %d's owner %q is not a live node", best, owner)
}

// killOwner SIGKILLs the owner of the busiest shard, measures how long
// until every shard has a live owner again (C5), and restarts it.
func (h *harness) killOwner(rep *Report) error {
	if len(h.live()) < 3 {
		return nil
	}
	victim, shard, err := h.busiestOwner()
	if err != nil {
		return err
	}
	wasLeader := h.isLeader(victim)
	killed := time.Now()
	_ = victim.cmd.Process.Kill()
	<-victim.exited
	h.nodesMu.Lock()
	victim.up = false
	h.nodesMu.Unlock()
	if err := h.waitOwned(victim, 30*time.Second); err != nil {
		return fmt.Errorf("C5: after killing %s: %w", victim.name, err)
	}
	took := time.Since(killed)
	rep.Kills++
	rep.Failovers = append(rep.Failovers, Failover{Took: took, Leader: wasLeader})
	role := ""
	if wasLeader {
		role = ", etcd's leader"
	}
	h.logf("kill %d: %s (owner of shard %d%s) killed; every shard owned again after %s", rep.Kills, victim.name, shard, role, took.Round(time.Millisecond))
	if err := h.start(victim, h.initialCluster(3), false); err != nil {
		return err
	}
	if err := h.waitReady(victim, time.Minute); err != nil {
		return err
	}
	return h.waitOwned(nil, 20*time.Second)
}

// pauseOwner SIGSTOPs the busiest shard's owner for d and resumes it:
// shorter than the failure detector nothing moves; past the detector or
// the lease its shards are taken elsewhere first, and whatever it then
// writes must fail the revision compare (checked at the end) and whatever
// it answers must be confirmed (the register clients ask it at once).
func (h *harness) pauseOwner(rep *Report, d time.Duration) error {
	if len(h.live()) < 3 {
		return nil
	}
	victim, shard, err := h.busiestOwner()
	if err != nil {
		return err
	}
	return h.pause(rep, victim, fmt.Sprintf("owner of shard %d", shard), d)
}

// pauseLeader stops the node whose etcd member is the Raft leader, owner
// or not: the paper-trail finding's schedule (C14), where
// another owner's transactions waited in the paused leader and landed
// when it resumed, and requests sent to it were forwarded at once.
func (h *harness) pauseLeader(rep *Report, d time.Duration) error {
	if len(h.live()) < 3 {
		return nil
	}
	for _, n := range h.live() {
		if h.isLeader(n) {
			rep.LeaderPauses++
			return h.pause(rep, n, "etcd's leader", d)
		}
	}
	return nil // no leader this moment (an election): the next round
}

func (h *harness) pause(rep *Report, victim *node, role string, d time.Duration) error {
	_ = victim.cmd.Process.Signal(syscall.SIGSTOP)
	paused := time.Now()
	h.nodesMu.Lock()
	victim.up = false // not asked while paused
	h.nodesMu.Unlock()
	var err error
	if d > detector {
		err = h.waitOwned(victim, 30*time.Second)
	}
	time.Sleep(max(0, d-time.Since(paused)))
	_ = victim.cmd.Process.Signal(syscall.SIGCONT)
	h.nodesMu.Lock()
	victim.up = true
	h.resumed, h.resumedUntil = victim, time.Now().Add(2*time.Second)
	h.nodesMu.Unlock()
	if err != nil {
		return fmt.Errorf("C5: while %s was paused: %w", victim.name, err)
	}
	kind := "past the lease"
	switch {
	case d <= detector:
		rep.ShortPauses++
		kind = "shorter than the detector"
	case d <= h.ttl:
		rep.DetectorPauses++
		kind = "past the detector, short of the lease"
	default:
		rep.Pauses++
	}
	h.logf("pause: %s (%s) stopped for %s (%s), then resumed", victim.name, role, time.Since(paused).Round(time.Millisecond), kind)
	return h.waitOwned(nil, 20*time.Second)
}

// rollingRestart stops every node in turn with SIGTERM and starts it again.
func (h *harness) rollingRestart(rep *Report) error {
	for _, n := range h.nodes[:3] {
		if !n.up {
			continue
		}
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			return fmt.Errorf("%s did not stop on SIGTERM", n.name)
		}
		h.nodesMu.Lock()
		n.up = false
		h.nodesMu.Unlock()
		if err := h.start(n, h.initialCluster(3), false); err != nil {
			return err
		}
		if err := h.waitReady(n, time.Minute); err != nil {
			return err
		}
		if err := h.waitOwned(nil, 20*time.Second); err != nil {
			return err
		}
	}
	rep.RollingRestarts++
	h.logf("rolling restart %d done", rep.RollingRestarts)
	return nil
}

// isLeader reports whether n's etcd member is the Raft leader.
func (h *harness) isLeader(n *node) bool {
	c, err := h.etcd()
	if err != nil {
		return false
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.Status(ctx, "http://"+n.cURL)
	return err == nil && st.Leader == st.Header.MemberId
}

// etcd is a client of the live members.
func (h *harness) etcd() (*clientv3.Client, error) {
	var eps []string
	for _, n := range h.live() {
		eps = append(eps, "http://"+n.cURL)
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// addAndRemoveMember adds n4 as an etcd member and warden node, waits until
// it owns shards, drains it (it stops by itself) and removes its member.
func (h *harness) addAndRemoveMember(rep *Report) error {
	c, err := h.etcd()
	if err != nil {
		return err
	}
	defer c.Close()
	n4 := h.nodes[3]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// etcd refuses a reconfiguration until every member has been active
	// for a while (a member restarted by the last fault may not be yet).
	var added *clientv3.MemberAddResponse
	for {
		added, err = c.MemberAdd(ctx, []string{"http://" + n4.peer})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("member add: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := h.start(n4, h.initialCluster(4), true); err != nil {
		return err
	}
	if err := h.waitReady(n4, time.Minute); err != nil {
		return err
	}
	rep.MembersAdded++
	owns := false
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !owns; time.Sleep(50 * time.Millisecond) {
		if v, err := h.clusterView(n4); err == nil {
			for _, s := range v.Shards {
				owns = owns || s.Owner == n4.name
			}
		}
	}
	if !owns {
		return errors.New("C2: the added node was given no shard")
	}
	h.logf("member n4 added and owns shards; draining it")
	if st, _, err := h.do(n4, "POST", "/v1/cluster/drain", opToken, nil, ""); err != nil || st != 202 {
		return fmt.Errorf("C9: drain answered %d %v", st, err)
	}
	select {
	case <-n4.exited:
	case <-time.After(30 * time.Second):
		return errors.New("C9: the drained node did not stop")
	}
	h.nodesMu.Lock()
	n4.up = false
	h.nodesMu.Unlock()
	if err := h.waitOwned(n4, 20*time.Second); err != nil {
		return err
	}
	if _, err := c.MemberRemove(ctx, added.Member.ID); err != nil {
		return fmt.Errorf("member remove: %w", err)
	}
	rep.MembersRemoved++
	h.logf("member n4 drained, stopped and removed")
	return nil
}

// github is the fake GitHub Actions API: each dispatch is recorded (I2)
// and starts a workflow run that calls back to any node.
func (h *harness) github(w http.ResponseWriter, r *http.Request) {
	d, ok := h.dispatches.Record(w, r)
	if ok && !h.stop.Load() {
		h.wg.Add(1)
		go h.workflow(d.Marquee, d.Generation, d.Action)
	}
}

// workflow plays one run, each callback sent to a random live node and
// retried with the same delivery id until answered, as a webhook sender
// does.
func (h *harness) workflow(id string, gen uint64, action string) {
	defer h.wg.Done()
	send := func(body map[string]any) {
		body["marquee_id"] = id
		delivery := fmt.Sprintf("%s-g%d-%d", id, gen, h.seq.Add(1))
		for attempt := 0; attempt < 300 && !h.stop.Load(); attempt++ {
			n := h.anyLive(nil)
			if n == nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			st, ans, err := h.do(n, "POST", "/v1/webhooks/terraform", cbToken, body, delivery)
			if h.record(st, err) == "ok" {
				if ans["result"] == "applied" {
					h.mu.Lock()
					h.applied[id] = append(h.applied[id], delivery)
					h.mu.Unlock()
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(time.Duration(20+h.intn(200)) * time.Millisecond)
	if action == "destroy" {
		send(map[string]any{"verb": "destroyed", "generation": gen})
		return
	}
	send(map[string]any{"verb": "step", "generation": gen, "step": "vm_starting"})
	send(map[string]any{"verb": "deployed", "generation": gen, "connection": map[string]any{"host": fmt.Sprintf("h-%d", gen), "port": 22,
		"user": "root", "ssh_private_key": "k", "free_domain": "x.example"}})
}

func (h *harness) operators() {
	defer h.wg.Done()
	n := 0
	for !h.stop.Load() {
		time.Sleep(time.Duration(40+h.intn(120)) * time.Millisecond)
		nd := h.anyLive(nil)
		if nd == nil {
			continue
		}
		h.mu.Lock()
		created := append([]string(nil), h.created...)
		h.mu.Unlock()
		switch r := h.intn(10); {
		case r < 4 && n < 120:
			n++
			id := fmt.Sprintf("m-%03d", n)
			st, _, err := h.do(nd, "POST", "/v1/marquees", opToken, map[string]any{"id": id, "kind": "tutorial"}, "")
			res := h.record(st, err)
			if res == "ok" || st == 409 {
				// 409: an earlier try was durable but its answer was lost.
				h.mu.Lock()
				h.created = append(h.created, id)
				h.mu.Unlock()
			} else if res == "unknown" {
				n-- // try the same id again: a create is idempotent by id
			}
		case r < 7 && len(created) > 0:
			st, _, err := h.do(nd, "POST", "/v1/marquees/"+created[h.intn(len(created))]+"/redeploy", opToken, nil, "")
			h.record(st, err)
		case r < 8 && len(created) > 0:
			st, _, err := h.do(nd, "POST", "/v1/marquees/"+created[h.intn(len(created))]+"/destroy", opToken, nil, "")
			h.record(st, err)
		case r < 9 && len(created) >= burst:
			h.redeployAtOnce(nd, created)
		}
	}
}

// burst is how many marquees redeployAtOnce redeploys together.
const burst = 8

// redeployAtOnce redeploys burst marquees at once through one node, so
// that their owners' commits wait together and go in groups (C15), under
// the same faults and checks as every other write.
func (h *harness) redeployAtOnce(nd *node, created []string) {
	start := h.intn(len(created))
	var wg sync.WaitGroup
	for i := range burst {
		id := created[(start+i)%len(created)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, err := h.do(nd, "POST", "/v1/marquees/"+id+"/redeploy", opToken, nil, "")
			h.record(st, err)
		}()
	}
	wg.Wait()
}
