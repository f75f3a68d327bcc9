package marquee

import (
	"fmt"
	"strconv"

	"github.com/wardenhq/warden/actors/entity"
)

// Change is one traced field a step changed, from what to what.
type Change = entity.Change

// The traced fields: where a marquee is, as its history must be able to
// say.
const (
	fieldServing = iota
	fieldLifecycle
	fieldGeneration
	fieldProgress
	tracedFields
)

var tracedNames = [tracedFields]string{"serving", "lifecycle", "generation", "progress"}

// traced is a state's traced fields as a history entry writes them.
func traced(s State) [tracedFields]string {
	return [tracedFields]string{string(s.Serving), string(s.Lifecycle), strconv.FormatUint(s.Generation, 10), s.Progress.String()}
}

// Changes is what a step from before to after changed of the traced
// fields, in their order; nil when it changed none.
func Changes(before, after State) []Change {
	b, a := traced(before), traced(after)
	var out []Change
	for i := range b {
		if b[i] != a[i] {
			out = append(out, Change{Field: tracedNames[i], From: b[i], To: a[i]})
		}
	}
	return out
}

// Replay follows a marquee's stored history, entry by entry in sequence
// order, and says where it stops being a true account (S14): a sequence
// that is not the next one, a change from a value the entries before it
// did not leave, or an end that is not the record's state. From the first
// entry (sequence 1) the fields start at a new marquee's zero values; from
// a trimmed window, each at the first value an entry names.
//
// An environment needs none: its audit and receipts live in its record,
// written in the same key as its state, so they cannot part.
type Replay struct {
	values  [tracedFields]string
	known   [tracedFields]bool
	last    uint64
	started bool
	// Broken is the first break found, with the sequence it is at.
	Broken *HistoryBreak
}

// HistoryBreak is where a history stops replaying to its record.
type HistoryBreak struct {
	Seq    uint64
	Reason string
}

func (b *HistoryBreak) Error() string { return fmt.Sprintf("history entry %d: %s", b.Seq, b.Reason) }

// Entry takes the entry stored at seq.
func (r *Replay) Entry(seq uint64, e Entry) {
	if r.Broken != nil {
		return
	}
	switch {
	case !r.started && seq == 1 && e.Changed != nil:
		// The create's entry: from a new marquee's zero values. (An
		// entry of a build before S14 names no change; the replay then
		// knows each field from the first entry that names it.)
		r.values, r.known = traced(State{}), [tracedFields]bool{true, true, true, true}
	case r.started && seq != r.last+1:
		r.breakAt(seq, "follows entry %d: entries between them are missing", r.last)
		return
	}
	r.started, r.last = true, seq
	for _, c := range e.Changed {
		i := fieldIndex(c.Field)
		switch {
		case i < 0:
			r.breakAt(seq, "changes a field history does not trace: %q", c.Field)
			return
		case r.known[i] && r.values[i] != c.From:
			r.breakAt(seq, "%s %s %s changes %s from %q, but the entries before it left %q", e.Source, e.Verb, e.Result, c.Field, c.From, r.values[i])
			return
		}
		r.values[i], r.known[i] = c.To, true
	}
}

// End checks the replayed fields against the record's state (whether the
// history reaches the record's newest sequence is its caller's to check,
// beside the record).
func (r *Replay) End(s State) *HistoryBreak {
	if r.Broken != nil {
		return r.Broken
	}
	now := traced(s)
	for i := range now {
		if r.known[i] && r.values[i] != now[i] {
			r.breakAt(r.last, "the history replays to %s %q; the record says %q", tracedNames[i], r.values[i], now[i])
			return r.Broken
		}
	}
	return nil
}

func (r *Replay) breakAt(seq uint64, format string, args ...any) {
	r.Broken = &HistoryBreak{Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

func fieldIndex(name string) int {
	for i, n := range tracedNames {
		if n == name {
			return i
		}
	}
	return -1
}
