package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/sim/serial"
)

// A cluster run (Options.Nodes > 1): the nodes are real actor systems,
// HTTP APIs and cluster.Nodes in this one process, each on its own run
// queue and clock, over the simulated etcd (etcd.go); the simulator ticks
// each node, carries their requests to each other, and pauses, kills,
// restarts and partitions them from the seed.

const (
	// simTick is how often the simulator ticks a node and probes its
	// peers (production: 100 ms, a tenth of the events). The lease is
	// longer than production's 3 s default in proportion (--lease-ttl 6s),
	// so that, as in production, the failure detector's second and a
	// takeover a few ticks later fit well inside a lease's local deadline:
	// the window in which a paused node may wake still believing it owns
	// a shard another node has taken.
	simTick     = time.Second
	simLeaseTTL = 6 * time.Second
	// clusterToken authenticates the nodes' messages to each other.
	clusterToken = "sim-cluster-token"
	// revokeWindow is how long a member may have been reachable from a
	// node that revokes its lease: the failure detector suspects only
	// after a second of unanswered probes, probing once a tick.
	revokeWindow = time.Second + simTick
)

// simNode is a cluster node's state in the simulated world, beyond its
// process: whether it is dead or paused, what came due while it was
// paused, and the partitions it is in.
type simNode struct {
	url   string
	cnode *cluster.Node
	down  bool
	// paused: its timers, queue and requests wait; held is what came due
	// meanwhile, run in order when it resumes, and waiting the requests
	// whose clients wait for it (their connections accepted by the
	// kernel).
	paused  bool
	held    []func()
	waiting []func()
	// silentAt is the last instant it was dead or paused (the C5 oracle).
	silentAt time.Time
	// coordCutUntil: cut off from etcd until then.
	coordCutUntil time.Time
}

// startCluster starts the nodes n1..nN on a fresh simulated etcd, the
// oracles reading it without faults.
func (w *world) startCluster() {
	w.etcd = newEtcd(w)
	w.store = persistence.OpenBackend(persistence.OpenKV(godKV{e: w.etcd}, 0), nil)
	for i := 1; i <= w.opts.Nodes; i++ {
		name := fmt.Sprintf("n%d", i)
		w.procs = append(w.procs, &proc{name: name, node: &simNode{url: "http://" + name + ".sim"}})
	}
	for _, p := range w.procs {
		w.startNode(p)
	}
}

// startNode boots a new incarnation of p: a new lease, a new store client,
// a new actor system that recovers each shard as it takes it.
func (w *world) startNode(p *proc) {
	p.inc++
	p.q = &serial.RunQueue{}
	p.crashAt = ""
	n := p.node
	n.down, n.paused, n.held, n.waiting = false, false, nil, nil
	n.silentAt = w.now()
	inc := p.inc
	client := etcdClient{e: w.etcd, p: p, inc: inc}
	p.store = persistence.OpenBackend(persistence.OpenKV(plantedKV(w.opts.Plant, client), 5*time.Second), nil)
	clk := procClock{w: w, p: p, inc: inc}
	n.cnode = cluster.NewNode(cluster.Config{Name: p.name, URL: n.url, TTL: simLeaseTTL, Coordinator: plantedCoordinator(w.opts.Plant, client),
		Clock: clk, Go: func(f func()) { f() }, Log: slog.New(traceLog{w: w, name: p.name}), Probe: plantedProbe(w.opts.Plant, w.probe(p)), Transport: peerTransport{w: w, from: p, inc: inc},
		Hooks: cluster.Hooks{
			Acquired: func(shard int, _ int64) {
				if shard == cluster.ShardOf("pool", "default") {
					w.cover("A7") // the pool recovered where it moved to
				}
				p.sys.AcquireShard(shard)
			},
			Released: func(shard int) { p.sys.ReleaseShard(shard) },
		}})
	n.cnode.SetPeers(clusterToken)
	cfg := w.systemConfig(p, p.store)
	cfg.Cluster = plantedCluster(w.opts.Plant, n.cnode)
	cfg.Logger = slog.New(slog.DiscardHandler)
	sys, err := actors.Start(cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: start %s: %v", p.name, err))
	}
	p.sys = sys
	p.api = httpapi.New(sys, httpapi.Options{CallbackToken: cbToken, OperatorToken: opToken, CallbackKeys: simCallbackKeys,
		Cluster: n.cnode, ClusterToken: clusterToken, PeerTransport: peerTransport{w: w, from: p, inc: inc}})
	w.logf("START %s (incarnation %d)", p.name, inc)
	w.checkApplied()
	w.tickNode(p, inc)
}

// tickNode ticks p's node (its lease, its shards, its probes of the others)
// and, when its store found etcd unreachable, looks again, every simTick
// for as long as the incarnation lives (a paused one's tick waits with it).
func (w *world) tickNode(p *proc, inc int) {
	ctx := context.Background()
	p.node.cnode.Tick(ctx)
	p.node.cnode.Probe(ctx)
	if p.store.Health().Problem() != nil {
		p.store.CheckHealth(ctx) // writable again once etcd answers
	}
	procClock{w: w, p: p, inc: inc}.AfterFunc(simTick, func() { w.tickNode(p, inc) })
}

// guardNode runs f on p; a process crash inside it kills that node, which
// starts again a little later.
func (w *world) guardNode(p *proc, f func()) {
	defer func() {
		if r := recover(); r != nil {
			pc, ok := r.(serial.ProcessCrash)
			if !ok {
				panic(r)
			}
			w.kill(p, pc.Point)
		}
	}()
	f()
	if p.crashAt != "" {
		w.kill(p, p.crashAt)
	}
}

// kill ends p's incarnation at once: its lease stays in etcd until it
// expires or the failure detector revokes it (C5), its shards with it.
func (w *world) kill(p *proc, point string) {
	if p.node.down {
		return
	}
	w.crashes++
	w.logf("KILL %s at %s (incarnation %d)", p.name, point, p.inc)
	p.inc++ // its timers, effects, queue and clients go quiet
	p.crashAt = ""
	p.node.down, p.node.paused, p.node.held, p.node.waiting = true, false, nil, nil
	p.node.silentAt = w.now()
	restart := w.uniform(time.Second, 30*time.Second)
	if w.faults.off {
		restart = 0
	}
	w.after(restart, "restart", func() {
		if p.node.down {
			w.startNode(p)
		}
	})
}

// pause stops p for d: nothing it armed fires, nothing queued for it runs,
// no request reaches it; then everything that came due runs, late, in
// order (a process stopped by the kernel, or a long GC).
func (w *world) pause(p *proc, d time.Duration) {
	if p.node.down || p.node.paused {
		return
	}
	w.logf("PAUSE %s for %s", p.name, d)
	p.node.paused = true
	inc := p.inc
	w.after(d, "resume", func() {
		if p.inc != inc || !p.node.paused {
			return
		}
		p.node.paused = false
		p.node.silentAt = w.now()
		held, waiting := p.node.held, p.node.waiting
		p.node.held, p.node.waiting = nil, nil
		// What runs first when a stopped process goes on is a race: its
		// timers (its tick, which would learn that its lease is gone), or
		// the requests that waited in its socket. The seed decides.
		first, then := held, waiting
		if w.rnd.IntN(2) == 0 {
			first, then = waiting, held
		}
		w.logf("RESUME %s (%d timers, %d waiting requests)", p.name, len(held), len(waiting))
		for _, f := range append(first, then...) {
			f()
		}
	})
}

// restartAll stops every node and starts each again (the quiet phase's
// clean restart).
func (w *world) restartAll(point string) {
	for _, p := range w.procs {
		w.kill(p, point)
	}
}

// --- between nodes ------------------------------------------------------------------

// cuts are the partitions between two nodes: until when each pair is cut.
type pair [2]string

func pairOf(a, b string) pair {
	if a > b {
		a, b = b, a
	}
	return pair{a, b}
}

// reachable says whether a request from p gets to q now.
func (w *world) reachable(p, q *proc) bool {
	return !q.node.down && !q.node.paused && !w.cutNow(p, q)
}

func (w *world) cutNow(p, q *proc) bool { return w.now().Before(w.cutUntil[pairOf(p.name, q.name)]) }

func (w *world) procAt(url string) *proc {
	for _, p := range w.procs {
		if strings.HasPrefix(url, p.node.url) {
			return p
		}
	}
	return nil
}

// probe is node p's failure detector's question: does q answer its
// /healthz now?
func (w *world) probe(p *proc) func(ctx context.Context, url string) bool {
	return func(_ context.Context, url string) bool {
		q := w.procAt(url)
		return q != nil && w.reachable(p, q)
	}
}

// peerTransport carries one node's requests to another (a forwarded
// request, a cross-entity message): to the other's handler, synchronously,
// unless the two are cut apart or the other is dead or paused. Its answer
// may be lost after the request was handled.
type peerTransport struct {
	w    *world
	from *proc
	inc  int
}

var errNoAnswer = errors.New("the peer did not answer")

func (t peerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := t.w
	q := w.procAt("http://" + req.URL.Host)
	if t.from.inc != t.inc || q == nil || !w.reachable(t.from, q) {
		return nil, errNoAnswer
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	rec, ok := w.serveOn(q, req, body)
	if !ok {
		return nil, errNoAnswer
	}
	if strings.HasPrefix(req.URL.Path, "/v1/internal/") || !w.faults.fire("cluster.forward-answer-lost") {
		return rec.Result(), nil
	}
	w.logf("forward %s %s from %s to %s: answer lost", req.Method, req.URL.Path, t.from.name, q.name)
	if w.opts.Plant == PlantForwardRetry {
		if rec, ok := w.serveOn(q, req, body); ok {
			return rec.Result(), nil
		}
	}
	return nil, errNoAnswer
}

// serveOn hands a request to q's handler; false when q died meanwhile.
func (w *world) serveOn(q *proc, req *http.Request, body []byte) (*httptest.ResponseRecorder, bool) {
	in := httptest.NewRequest(req.Method, req.URL.String(), bytes.NewReader(body))
	in.Header = req.Header.Clone()
	rec := httptest.NewRecorder()
	inc := q.inc
	w.onProc(q, inc, func() { q.api.ServeHTTP(rec, in) })
	return rec, q.inc == inc
}

// --- the weather ----------------------------------------------------------------------

// clusterWeather draws, through the faulty phase, the nodes' own faults:
// pauses, kills, partitions from etcd and between two nodes.
func (w *world) clusterWeather() {
	end := epoch.Add(w.opts.FaultyPhase)
	for t := epoch.Add(w.uniform(10*time.Second, time.Minute)); t.Before(end); t = t.Add(w.uniform(10*time.Second, 2*time.Minute)) {
		w.at(t, "weather", w.clusterFault)
	}
}

func (w *world) clusterFault() {
	p := w.procs[w.rnd.IntN(len(w.procs))]
	switch {
	case w.faults.fire("cluster.node-pause"):
		// Short pauses are the dangerous ones: past the failure detector's
		// second, short of the lease's local deadline.
		w.pauseWithProbe(p, w.uniform(500*time.Millisecond, 10*time.Second))
	case w.faults.fire("cluster.node-kill"):
		w.guardNode(p, func() { w.kill(p, "weather") })
	case w.faults.fire("cluster.partition-coordinator"):
		d := w.uniform(time.Second, 8*time.Second)
		p.node.coordCutUntil = w.now().Add(d)
		w.logf("PARTITION %s from etcd for %s", p.name, d)
	case w.faults.fire("cluster.partition-peer"):
		q := w.procs[w.rnd.IntN(len(w.procs))]
		if q == p {
			return
		}
		d := w.uniform(time.Second, 8*time.Second)
		w.cutUntil[pairOf(p.name, q.name)] = w.now().Add(d)
		w.logf("PARTITION %s from %s for %s", p.name, q.name, d)
	}
}

// --- oracles --------------------------------------------------------------------------

// checkHolder: a write of p's is one p may make (C3): p holds the entity's
// shard key in etcd, at the epoch p's table fences with, under its current
// lease. Fencing makes it so whatever p believes; a write let through
// without it is a second writer.
func (w *world) checkHolder(p *proc, kind, id string) {
	shard := cluster.ShardOf(kind, id)
	owner, epoch, lease, held := w.etcd.holder(shard)
	mine := p.node.cnode.Table().Epoch(shard)
	l := w.etcd.leases[lease]
	if held && owner == p.name && epoch == mine && l != nil && l.owner == p && l.inc == p.inc {
		w.cover("C3")
		return
	}
	w.violate("C3", "%s (incarnation %d) wrote %s %s in shard %d at epoch %d while the shard key was held=%t by %q at epoch %d",
		p.name, p.inc, kind, id, shard, mine, held, owner, epoch)
}

// checkRevocation: the failure detector revokes only a member that did not
// answer: one dead or paused, or cut off from the revoker, within the
// last revokeWindow. A lease of an incarnation that has died, or the
// revoker's own earlier one, may go at any time.
func (w *world) checkRevocation(by *proc, l *elease) {
	q := l.owner
	if q == by || l.inc != q.inc || q.node.down || q.node.paused || w.cutNow(by, q) {
		w.cover("C5")
		return
	}
	last := q.node.silentAt
	if end := w.cutUntil[pairOf(by.name, q.name)]; end.After(last) {
		last = end
	}
	if w.now().Sub(last) <= revokeWindow {
		w.cover("C5")
		return
	}
	w.violate("C5", "%s revoked the lease of %s, which answered throughout the last %s", by.name, q.name, w.now().Sub(last))
}

// traceLog puts a node's warnings and errors in the trace, attributes in
// the order given (deterministic, like everything in it).
type traceLog struct {
	w     *world
	name  string
	attrs []slog.Attr
}

func (t traceLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (t traceLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s", t.name, r.Level, r.Message)
	for _, a := range t.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	t.w.logf("%s", b.String())
	return nil
}

func (t traceLog) WithAttrs(as []slog.Attr) slog.Handler {
	t.attrs = append(append([]slog.Attr(nil), t.attrs...), as...)
	return t
}

func (t traceLog) WithGroup(string) slog.Handler { return t }
