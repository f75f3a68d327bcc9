package actors

import (
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
)

// The runtime finds a kind's optional parts by type assertion, once, at
// Register: a method renamed on one side would drop the part silently
// (no wake index, no effects). These make each kind's parts a compile
// error to lose.
var (
	_ runtime.Effects[record.Marquee, marquee.Event, marquee.Outcome]              = marqueeKind{}
	_ runtime.Sends[record.Marquee, marquee.Outcome]                               = marqueeKind{}
	_ runtime.WakeIndexed[record.Marquee]                                          = marqueeKind{}
	_ runtime.Observes[record.Marquee, marquee.Event, marquee.Outcome]             = marqueeKind{}
	_ runtime.Starts[record.Marquee, marquee.Event, marquee.Outcome]               = marqueeKind{}
	_ runtime.Wakes[record.Marquee, marquee.Event, marquee.Outcome]                = marqueeKind{}
	_ runtime.Stores                                                               = marqueeKind{}
	_ runtime.Admits[record.Marquee, marquee.Event]                                = marqueeKind{}
	_ runtime.Conflicts[record.Marquee]                                            = marqueeKind{}
	_ runtime.Holds[record.Marquee]                                                = marqueeKind{}
	_ runtime.Idles[record.Marquee]                                                = marqueeKind{}
	_ runtime.Copies[record.Marquee]                                               = marqueeKind{}
	_ runtime.Wire[marquee.Event]                                                  = marqueeKind{}
	_ runtime.Sends[record.Pool, admission.Outcome]                                = poolKind{}
	_ runtime.Starts[record.Pool, admission.Event, admission.Outcome]              = poolKind{}
	_ runtime.Observes[record.Pool, admission.Event, admission.Outcome]            = poolKind{}
	_ runtime.Effects[record.Environment, environment.Event, environment.Outcome]  = envKind{}
	_ runtime.Sends[record.Environment, environment.Outcome]                       = envKind{}
	_ runtime.WakeIndexed[record.Environment]                                      = envKind{}
	_ runtime.Observes[record.Environment, environment.Event, environment.Outcome] = envKind{}
	_ runtime.Starts[record.Environment, environment.Event, environment.Outcome]   = envKind{}
	_ runtime.Wakes[record.Environment, environment.Event, environment.Outcome]    = envKind{}
	_ runtime.Stores                                                               = envKind{}
	_ runtime.Conflicts[record.Environment]                                        = envKind{}
	_ runtime.Holds[record.Environment]                                            = envKind{}
	_ runtime.Wire[environment.Event]                                              = envKind{}
	_ runtime.Sends[record.Branch, environment.BranchOutcome]                      = branchKind{}
	_ runtime.Wire[environment.NextGeneration]                                     = branchKind{}
)
