package entity

import "time"

// Input is one input that would move an entity now, as its explanation
// lists it (O17): what it is, when it would come (a timer's deadline;
// zero: any time) and what it would do, in the words its step's outcome
// gives. Every machine's Awaiting returns these.
type Input struct {
	Event  string    `json:"event"`
	At     time.Time `json:"at,omitzero"`
	Effect string    `json:"effect"`
}

// Change is one field a step changed, from what to what: a marquee's
// history entry keeps its own (S14), and a dry run reports them (O18).
type Change struct {
	Field string `json:"field"`
	From  string `json:"from"`
	To    string `json:"to"`
}
