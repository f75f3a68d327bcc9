package actors

import (
	"github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/actors/runtime"
)

// The runtime finds a kind's optional parts by type assertion, once, at
// Register: a method renamed on one side would drop the part silently
// (no wake index, no effects). These make each kind's parts a compile
// error to lose.
var (
	_ runtime.Effects[MarqueeRecord, marquee.Event, marquee.Outcome]      = marqueeKind{}
	_ runtime.Sends[MarqueeRecord, marquee.Outcome]                       = marqueeKind{}
	_ runtime.WakeIndexed[MarqueeRecord]                                  = marqueeKind{}
	_ runtime.Observes[MarqueeRecord, marquee.Event, marquee.Outcome]     = marqueeKind{}
	_ runtime.Starts[MarqueeRecord, marquee.Event, marquee.Outcome]       = marqueeKind{}
	_ runtime.Wakes[MarqueeRecord, marquee.Event, marquee.Outcome]        = marqueeKind{}
	_ runtime.Stores                                                      = marqueeKind{}
	_ runtime.Admits[MarqueeRecord, marquee.Event]                        = marqueeKind{}
	_ runtime.Conflicts[MarqueeRecord]                                    = marqueeKind{}
	_ runtime.Holds[MarqueeRecord]                                        = marqueeKind{}
	_ runtime.Idles[MarqueeRecord]                                        = marqueeKind{}
	_ runtime.Copies[MarqueeRecord]                                       = marqueeKind{}
	_ runtime.Wire[marquee.Event]                                         = marqueeKind{}
	_ runtime.Sends[PoolRecord, admission.Outcome]                        = poolKind{}
	_ runtime.Starts[PoolRecord, admission.Event, admission.Outcome]      = poolKind{}
	_ runtime.Observes[PoolRecord, admission.Event, admission.Outcome]    = poolKind{}
	_ runtime.Effects[EnvRecord, environment.Event, environment.Outcome]  = envKind{}
	_ runtime.Sends[EnvRecord, environment.Outcome]                       = envKind{}
	_ runtime.WakeIndexed[EnvRecord]                                      = envKind{}
	_ runtime.Observes[EnvRecord, environment.Event, environment.Outcome] = envKind{}
	_ runtime.Starts[EnvRecord, environment.Event, environment.Outcome]   = envKind{}
	_ runtime.Wakes[EnvRecord, environment.Event, environment.Outcome]    = envKind{}
	_ runtime.Stores                                                      = envKind{}
	_ runtime.Conflicts[EnvRecord]                                        = envKind{}
	_ runtime.Holds[EnvRecord]                                            = envKind{}
	_ runtime.Wire[environment.Event]                                     = envKind{}
	_ runtime.Sends[BranchRecord, environment.BranchOutcome]              = branchKind{}
	_ runtime.Wire[environment.NextGeneration]                            = branchKind{}
)
