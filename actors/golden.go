package actors

import (
	"time"

	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
)

// The pure machines' golden suites print, beside each step, what the
// runtime's one batch would hold for it (runtime.DescribeWrite): these lift
// a step the machine took to the kind's durable record, as the kind's own
// Step does, and stage it into a recorder with the kind's own Stage. A
// suite keeps the records between steps, so history sequences and wake
// moves are the ones the runtime would write.

// MarqueeWrite is the write of one marquee step from the record before
// it; delivery is the callback's delivery id ("" for none).
func MarqueeWrite(before MarqueeRecord, s marquee.State, rd marquee.Outcome, now time.Time, delivery string) (MarqueeRecord, string) {
	if rd.Err != nil {
		return before, "none"
	}
	next := nextRecord(before, s, rd, now)
	return next, runtime.DescribeWrite(runtime.Kind[MarqueeRecord, marquee.Event, marquee.Outcome](marqueeKind{sys: &System{}}), s.ID, before, next, rd, delivery)
}

// PoolWrite is the write of one pool step.
func PoolWrite(before, next admission.Pool, rd admission.Outcome) string {
	k := runtime.Kind[PoolRecord, admission.Event, admission.Outcome](poolKind{sys: &System{}})
	return runtime.DescribeWrite(k, next.Name, PoolRecord{Pool: before}, PoolRecord{Pool: next}, rd, "")
}

// EnvironmentWrite is the write of one environment step from the record
// before it (zero for a create).
func EnvironmentWrite(before EnvRecord, e environment.Env, rd environment.Outcome) (EnvRecord, string) {
	if rd.Err != nil {
		return before, "none"
	}
	next := EnvRecord{Env: e, WakeAt: rd.Wake}
	k := runtime.Kind[EnvRecord, environment.Event, environment.Outcome](envKind{sys: &System{}})
	return next, runtime.DescribeWrite(k, e.ID, before, next, rd, "")
}
