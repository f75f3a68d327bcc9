// Package linear checks, with porcupine, that clients' histories of a
// marquee's serving state are linearizable, one marquee at a time: the
// cluster harness's real processes and the simulator's nodes record the
// same operations and are judged by the same model. An answer that 5xx'd
// or never came may have taken effect at any time after it was sent
// (Jepsen's "unknown"); a 409 is the refusal of an enable while serving
// was not disabled (M8), or of a create of a marquee that exists.
package linear

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The states of a marquee's serving, as the model sees it.
const (
	Absent   = "absent"
	Active   = "active"
	Disabled = "disabled"
)

// Input is one operation on a marquee's serving state: create (a
// bring-your-own marquee, active once created, M4), enable, disable, get.
type Input struct {
	Marquee string
	Op      string
}

// Output is what it was answered.
type Output struct {
	// Outcome: ok (2xx), conflict (409), notfound (404), failed (another
	// 4xx: nothing happened), unknown (5xx, no answer: maybe).
	Outcome string
	// Serving is what an ok answer showed.
	Serving string
}

// History collects operations from many clients.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewHistory starts a history at start (times are kept relative to it).
func NewHistory(start time.Time) *History { return &History{start: start} }

// Add records one operation; an unknown outcome's return is the end of
// time, so that it may take effect at any point after its invoke.
func (h *History) Add(client int, in Input, out Output, invoked, returned time.Time) {
	ret := int64(returned.Sub(h.start))
	if out.Outcome == "unknown" {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(invoked.Sub(h.start)), Output: out, Return: ret})
	h.mu.Unlock()
}

// Operations is the history so far.
func (h *History) Operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// Model is a marquee's serving state as a register with M8's precondition
// on enable; initial is every marquee's state before its history (Active
// for marquees created beforehand, Absent when the history creates them).
func Model(initial string) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Partition:         byMarquee,
		Init:              func() []any { return []any{initial} },
		Step:              step,
		DescribeOperation: describeOp,
	}
	return m.ToModel()
}

func byMarquee(ops []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	for _, op := range ops {
		m := op.Input.(Input).Marquee
		by[m] = append(by[m], op)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

// applied is the state an operation leaves when it happens on s, and
// whether it may answer ok there.
func applied(s string, op string) (string, bool) {
	switch {
	case op == "create" && s == Absent:
		return Active, true
	case op == "create", s == Absent:
		return s, false // a conflict, or nothing to act on
	case op == "enable" && s != Disabled:
		return s, false // M8
	case op == "enable":
		return Active, true
	case op == "disable":
		return Disabled, true
	}
	return s, true // get
}

func step(state, input, output any) []any {
	s, in, out := state.(string), input.(Input), output.(Output)
	next, ok := applied(s, in.Op)
	switch out.Outcome {
	case "unknown":
		return []any{s, next}
	case "failed":
		return []any{s}
	case "notfound":
		if s == Absent {
			return []any{s}
		}
		return nil
	case "conflict":
		if !ok && s != Absent {
			return []any{s}
		}
		return nil
	}
	// ok: the operation happened here, and its answer shows the result.
	if !ok || out.Serving != next {
		return nil
	}
	return []any{next}
}

func describeOp(input, output any) string {
	in, out := input.(Input), output.(Output)
	return fmt.Sprintf("%s %s -> %s %s", in.Op, in.Marquee, out.Outcome, out.Serving)
}

// Check checks every marquee's history under Model(initial); the error
// names the first that is not linearizable and its operations. timeout
// bounds each marquee's search.
func Check(ops []porcupine.Operation, initial string, timeout time.Duration) error {
	model := Model(initial)
	for _, part := range model.Partition(ops) {
		res, _ := porcupine.CheckOperationsVerbose(model, part, timeout)
		switch res {
		case porcupine.Illegal:
			return fmt.Errorf("not linearizable: marquee %s's history of %d operations, first illegal in its first %d (%s)",
				part[0].Input.(Input).Marquee, len(part), len(firstIllegal(model, part, timeout)), Describe(firstIllegal(model, part, timeout)))
		case porcupine.Unknown:
			return fmt.Errorf("the linearizability check of marquee %s timed out", part[0].Input.(Input).Marquee)
		}
	}
	return nil
}

// firstIllegal is the shortest prefix (in call order) of an illegal
// history that is illegal already, found by bisection: what Describe
// prints ends where the history went wrong.
func firstIllegal(model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) []porcupine.Operation {
	s := append([]porcupine.Operation(nil), ops...)
	sort.Slice(s, func(i, j int) bool { return s[i].Call < s[j].Call })
	lo, hi := 1, len(s)
	for lo < hi {
		mid := (lo + hi) / 2
		if porcupine.CheckOperationsTimeout(model, s[:mid], timeout) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return s[:lo]
}

// Describe prints a history in call order, the last 40 operations.
func Describe(ops []porcupine.Operation) string {
	s := append([]porcupine.Operation(nil), ops...)
	sort.Slice(s, func(i, j int) bool { return s[i].Call < s[j].Call })
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	out := ""
	for _, op := range s {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = time.Duration(op.Return).String()
		}
		out += fmt.Sprintf("[%s..%s c%d %s] ", time.Duration(op.Call), ret, op.ClientId, describeOp(op.Input, op.Output))
	}
	return out
}
