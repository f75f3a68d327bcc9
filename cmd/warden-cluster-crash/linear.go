package main

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability per entity (issue 20): clients enable, disable and read
// the serving state of a few bring-your-own marquees through any node,
// each operation recorded with its invoke and return times and its
// outcome, and each marquee's history is checked as a register with
// porcupine. An answer that 5xx'd or never came may have taken effect at
// any time after it was sent (Jepsen's "unknown"); a 409 is the refusal
// of an enable while serving was not disabled (M8).

// regInput is one operation on a marquee's serving state.
type regInput struct {
	Marquee string
	Op      string // enable, disable, get
}

// regOutput is what it was answered.
type regOutput struct {
	// Outcome: ok (2xx), conflict (409), failed (another 4xx: nothing
	// happened), unknown (5xx, no answer: maybe).
	Outcome string
	// Serving is what an ok answer showed.
	Serving string
}

// regHistory collects operations from many clients.
type regHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func newRegHistory() *regHistory { return &regHistory{start: time.Now()} }

func (h *regHistory) since(t time.Time) int64 { return int64(t.Sub(h.start)) }

// add records one operation; an unknown outcome's return is the end of
// time, so that it may take effect at any point after its invoke.
func (h *regHistory) add(client int, in regInput, out regOutput, invoked, returned time.Time) {
	ret := h.since(returned)
	if out.Outcome == "unknown" {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: h.since(invoked), Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *regHistory) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]porcupine.Operation(nil), h.ops...)
}

// servingModel is a marquee's serving state as a register with M8's
// precondition on enable.
var servingModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range ops {
			m := op.Input.(regInput).Marquee
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
	},
	Init: func() []any { return []any{"active"} }, // a byo marquee is created active (M4)
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		applied := s
		switch in.Op {
		case "enable":
			if s == "disabled" {
				applied = "active"
			}
		case "disable":
			applied = "disabled"
		}
		switch out.Outcome {
		case "unknown":
			return []any{s, applied}
		case "failed":
			return []any{s}
		case "conflict":
			if in.Op == "enable" && s != "disabled" {
				return []any{s}
			}
			return nil
		}
		// ok: the operation happened here, and its answer shows the result.
		switch {
		case in.Op == "enable" && s != "disabled":
			return nil
		case out.Serving != applied:
			return nil
		}
		return []any{applied}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s %s -> %s %s", in.Op, in.Marquee, out.Outcome, out.Serving)
	},
}

// checkLinearizable checks every marquee's history; the error names the
// first that is not linearizable and its operations.
func checkLinearizable(ops []porcupine.Operation) error {
	model := servingModel.ToModel()
	for _, part := range model.Partition(ops) {
		res, _ := porcupine.CheckOperationsVerbose(model, part, time.Minute)
		switch res {
		case porcupine.Illegal:
			return fmt.Errorf("not linearizable: marquee %s's history of %d operations (%s)", part[0].Input.(regInput).Marquee, len(part), describe(part))
		case porcupine.Unknown:
			return fmt.Errorf("the linearizability check of marquee %s timed out", part[0].Input.(regInput).Marquee)
		}
	}
	return nil
}

// describe prints a history in call order, the last 40 operations.
func describe(ops []porcupine.Operation) string {
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
		out += fmt.Sprintf("[%s..%s c%d %s] ", time.Duration(op.Call), ret, op.ClientId, servingModel.DescribeOperation(op.Input, op.Output))
	}
	return out
}
