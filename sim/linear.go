package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

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

func (w *world) linOp(client int, id, op string) {
	p := w.entry()
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

// checkLinear judges the clients' history (C4).
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
