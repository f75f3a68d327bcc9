package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/linear"
)

// The cluster run's clients (C4): a few bring-your-own marquees that
// clients create, enable, disable and read through whichever node they
// reach, each operation kept with its outcome, and each marquee's history
// checked for linearizability at the end. The simulator's calls are
// synchronous, so an answered operation's invoke and return are one
// instant, except a request to a paused node, whose client waits until
// the node goes on; times are kept as the order things ran in. One whose
// answer never came (a dead node, a 5xx) may take effect at any later
// time.
type linClients struct {
	h   *linear.History
	seq int64
}

const (
	linMarquees = 2
	linClientN  = 3
)

// linWorkload draws the clients' operations from the seed alone, so that
// the fault-free run gets the same ones.
func (w *world) linWorkload() {
	r := rand.New(rand.NewPCG(w.opts.Seed, 7))
	w.lin = &linClients{h: linear.NewHistory(epoch)}
	end := epoch.Add(w.opts.FaultyPhase + w.opts.QuietPhase/2)
	for t := epoch.Add(time.Minute); t.Before(end); t = t.Add(time.Duration(2+r.IntN(20)) * time.Second) {
		id := fmt.Sprintf("lin-%d", r.IntN(linMarquees))
		op := []string{"create", "enable", "disable", "disable", "get", "get", "get"}[r.IntN(7)]
		client := r.IntN(linClientN)
		w.at(t, "client", func() { w.linOp(client, id, op) })
	}
}

func (w *world) linOp(client int, id, op string) { w.linOpOn(w.entry(), client, id, op) }

// linOpOn makes one client operation through p; a paused p keeps its
// client waiting.
func (w *world) linOpOn(p *proc, client int, id, op string) {
	w.lin.seq++
	invoked := epoch.Add(time.Duration(2 * w.lin.seq))
	if p.node.paused {
		// The client waits: its request is served when the node goes on.
		inc := p.inc
		p.node.waiting = append(p.node.waiting, func() {
			if p.inc == inc {
				w.linDo(p, client, id, op, invoked)
			}
		})
		return
	}
	w.linDo(p, client, id, op, invoked)
}

// linDo makes one client operation on p and records it.
func (w *world) linDo(p *proc, client int, id, op string, invoked time.Time) {
	var st int
	var ans []byte
	var lost bool
	switch op {
	case "create":
		st, ans, lost = w.callOn(p, "POST", "/v1/marquees", opToken, map[string]any{"id": id, "kind": "byo",
			"connection": map[string]any{"host": "byo.host", "port": 22, "user": "root", "ssh_private_key": "k"}}, "")
	case "get":
		st, ans, lost = w.callOn(p, "GET", "/v1/marquees/"+id, opToken, nil, "")
	default:
		st, ans, lost = w.callOn(p, "POST", "/v1/marquees/"+id+"/"+op, opToken, nil, "")
	}
	out := linear.Output{Outcome: "ok"}
	switch {
	case lost || st >= 500:
		out.Outcome = "unknown"
	case st == http.StatusConflict:
		out.Outcome = "conflict"
	case st == http.StatusNotFound:
		out.Outcome = "notfound"
	case st >= 400:
		out.Outcome = "failed"
	default:
		var v struct {
			Serving string `json:"serving"`
		}
		_ = json.Unmarshal(ans, &v)
		out.Serving = v.Serving
	}
	w.lin.seq++
	returned := epoch.Add(time.Duration(2*w.lin.seq + 1))
	w.lin.h.Add(client, linear.Input{Marquee: id, Op: op}, out, invoked, returned)
	w.logf("client %d %s %s on %s -> %d %s %s", client, op, id, p.name, st, out.Outcome, out.Serving)
}

// checkLinear judges the clients' history.
func (w *world) checkLinear() {
	if w.lin == nil {
		return
	}
	if err := linear.Check(w.lin.h.Operations(), linear.Absent, 10*time.Second); err != nil {
		w.violate("C4", "%v", err)
		return
	}
	w.cover("C4")
}

// pauseWithProbe pauses p for d and, every other time, aims the clients
// at it. Just before the pause a marquee whose shard p holds is
// enabled through p, so that p's actor holds it in memory, serving. Late
// in the pause, once p's shards have had time to move, it is disabled
// through another node, then enabled again through p, whose client waits
// until p goes on. From memory p would refuse that enable (it is serving
// already: a refusal writes nothing), and answered unconfirmed the refusal
// follows an acknowledged disable that no order explains. (A read is a
// linearizable etcd read, and a disable always writes, so only a refusal
// can be stale here.) The random workload alone meets this rarely: the
// pause, the shard, the actor in memory, the change and the command must
// line up.
func (w *world) pauseWithProbe(p *proc, d time.Duration) {
	// The probe's pause ends while p still believes it holds its shards
	// (its own deadline is at most its lease's expiry less the node's
	// margin, 300 ms), and late enough for them to have moved.
	expires, ok := w.etcd.leaseExpiry(p)
	longest := expires.Sub(w.now()) - 400*time.Millisecond
	if !ok || w.lin == nil || longest < 3*time.Second || w.rnd.IntN(2) == 0 {
		w.pause(p, d)
		return
	}
	d = w.uniform(3*time.Second, longest)
	id := ""
	for i := range linMarquees {
		if c := fmt.Sprintf("lin-%d", i); p.node.cnode.Table().Owns(cluster.ShardOf("marquee", c)) {
			id = c
			break
		}
	}
	if id == "" || p.node.down || p.node.paused {
		w.pause(p, d)
		return
	}
	i := slices.Index(w.procs, p)
	q := w.procs[(i+1+w.rnd.IntN(len(w.procs)-1))%len(w.procs)]
	client := linClientN // a client of its own: its operations never overlap another's
	w.linOpOn(p, client, id, "enable")
	w.pause(p, d)
	w.after(d-500*time.Millisecond, "client", func() { w.linOpOn(q, client, id, "disable") })
	w.after(d-250*time.Millisecond, "client", func() { w.linOpOn(p, client, id, "enable") })
}
