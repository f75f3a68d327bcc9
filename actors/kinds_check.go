package actors

import (
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
)

// The runtime finds a kind's optional parts (Executor, Observes, Wire) by
// type assertion, once, at Register: a method renamed on one side would
// drop the part silently (no effects, no wire form). These make each
// kind's parts a compile error to lose.
var (
	_ runtime.Executor[record.Marquee, marquee.Event, marquee.Outcome]             = marqueeKind{}
	_ runtime.Observes[record.Marquee, marquee.Event, marquee.Outcome]             = marqueeKind{}
	_ runtime.Wire[marquee.Event]                                                  = marqueeKind{}
	_ runtime.Executor[record.Pool, admission.Event, admission.Outcome]            = poolKind{}
	_ runtime.Observes[record.Pool, admission.Event, admission.Outcome]            = poolKind{}
	_ runtime.Wire[admission.Event]                                                = poolKind{}
	_ runtime.Executor[record.Environment, environment.Event, environment.Outcome] = envKind{}
	_ runtime.Observes[record.Environment, environment.Event, environment.Outcome] = envKind{}
	_ runtime.Wire[environment.Event]                                              = envKind{}
	_ runtime.Wire[environment.NextGeneration]                                     = branchKind{}
)
