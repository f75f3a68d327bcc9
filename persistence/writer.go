package persistence

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Writer is what a kind stages one step into: a Batch that commits, or a
// Recorder that only lists the writes (the golden suites' write: line).
type Writer interface {
	Put(key []byte, v any)
	Set(key, val []byte)
	Delete(key []byte)
	DeleteRange(lower, upper []byte)
	MoveWake(kind, id string, old, at time.Time)
	// PutDeliveries stages an entity's deliveries record as it is after
	// the delivery id (the write line names it); rewrite is
	// LoadDeliveries'; inRecord says the entity's record keeps the newest
	// chunk (Deliveries.Recent).
	PutDeliveries(entity, deliveryID string, ds Deliveries, rewrite, inRecord bool)
}

var (
	_ Writer = (*Batch)(nil)
	_ Writer = (*Recorder)(nil)
)

// Recorder lists the keys a step would write, in order, and writes none.
type Recorder struct{ ops []recorded }

type recorded struct {
	key     string
	deleted bool
	note    string // what the write line says of it, if not its key
}

func (r *Recorder) Put(key []byte, _ any) { r.Set(key, nil) }
func (r *Recorder) Set(key, _ []byte)     { r.ops = append(r.ops, recorded{key: string(key)}) }
func (r *Recorder) Delete(key []byte) {
	r.ops = append(r.ops, recorded{key: string(key), deleted: true})
}

func (r *Recorder) DeleteRange(lower, _ []byte) {
	r.ops = append(r.ops, recorded{key: string(lower), deleted: true, note: "range"})
}

func (r *Recorder) MoveWake(kind, id string, old, at time.Time) { moveWake(r, kind, id, old, at) }
func (r *Recorder) PutDeliveries(entity, deliveryID string, _ Deliveries, _, _ bool) {
	r.ops = append(r.ops, recorded{key: string(DeliveriesKey(entity)), note: deliveryID})
}

// String says what was written, family by family in the order each was
// first written, e.g. "marquee m-1, history +1, dedup d-7, wake 00:20:00
// (was 00:05:00)"; "none" for nothing.
func (r *Recorder) String() string {
	var order []string
	parts := map[string][]string{}
	for _, op := range r.ops {
		fam, word := describeKey(op)
		if _, ok := parts[fam]; !ok {
			order = append(order, fam)
		}
		parts[fam] = append(parts[fam], word)
	}
	if len(order) == 0 {
		return "none"
	}
	out := make([]string, 0, len(order))
	for _, fam := range order {
		out = append(out, summarize(fam, parts[fam]))
	}
	return strings.Join(out, ", ")
}

// describeKey names a key's family and what the write did to it.
func describeKey(op recorded) (family, word string) {
	del := func(s string) string {
		if op.deleted {
			return "-" + s
		}
		return s
	}
	k := op.key
	for _, f := range []struct{ prefix, name string }{{MarqueePrefix, "marquee"}, {PoolPrefix, "pool"}, {EnvPrefix, "environment"}} {
		if id, ok := strings.CutPrefix(k, f.prefix); ok {
			return f.name, del(id)
		}
	}
	switch {
	case strings.HasPrefix(k, HistoryFamily) && op.note == "range":
		return "history", "trimmed"
	case strings.HasPrefix(k, HistoryFamily):
		return "history", del("+")
	case strings.HasPrefix(k, DedupFamily):
		return "dedup", del(k[strings.LastIndexByte(k, '/')+1:])
	case strings.HasPrefix(k, DeliveriesFamily):
		return "dedup", del(op.note)
	case strings.HasPrefix(k, AdmissionFamily):
		return "admission", del(k[strings.LastIndexByte(k, '/')+1:])
	case strings.HasPrefix(k, BranchFamily):
		rest := strings.TrimPrefix(k, BranchFamily)
		i := strings.LastIndexByte(rest, '/')
		if g, err := strconv.ParseUint(rest[i+1:], 16, 64); i > 0 && err == nil {
			return "branch " + rest[:i], del("generation " + strconv.FormatUint(g, 10))
		}
		return "branch", del(rest)
	case strings.HasPrefix(k, WakePrefix):
		rest := strings.TrimPrefix(k, WakePrefix)
		if ns, err := strconv.ParseUint(rest[:min(16, len(rest))], 16, 64); err == nil {
			return "wake", del(time.Unix(0, int64(ns)).UTC().Format(time.TimeOnly))
		}
	}
	return "key", del(k)
}

// summarize joins one family's writes: a history counts its entries, a
// wake says where it was moved from, the others list what they wrote.
func summarize(family string, words []string) string {
	switch family {
	case "history":
		added, dropped, trimmed := 0, 0, false
		for _, w := range words {
			switch w {
			case "+":
				added++
			case "trimmed":
				trimmed = true
			default:
				dropped++
			}
		}
		s := fmt.Sprintf("history +%d", added)
		if dropped > 0 {
			s += fmt.Sprintf(" -%d", dropped)
		}
		if trimmed {
			s += " (window trimmed)"
		}
		return s
	case "wake":
		var set, was []string
		for _, w := range words {
			if t, ok := strings.CutPrefix(w, "-"); ok {
				was = append(was, t)
			} else {
				set = append(set, t)
			}
		}
		switch {
		case len(set) == 0:
			return "wake cleared (was " + strings.Join(was, " ") + ")"
		case len(was) == 0:
			return "wake " + strings.Join(set, " ")
		}
		return "wake " + strings.Join(set, " ") + " (was " + strings.Join(was, " ") + ")"
	}
	return family + " " + strings.Join(words, " ")
}
