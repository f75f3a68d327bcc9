package driver

import "context"

// DescriptorsPerProcess is what one driver process holds of warden's
// descriptors while it starts: three pipes (stdin, stdout, stderr) both
// ends until the fork is done, and the pidfd Go waits on.
const DescriptorsPerProcess = 7

// Processes bounds the driver processes warden runs at once, across every
// driver (S13). Without a bound, a round over many environments or a
// burst of dispatches started one process each at once, and their pipes
// took the descriptors the listener and the store were kept (found: 120
// slow dispatches under `ulimit -n 64` failed "pipe2: too many open
// files", and nothing stopped them taking Pebble's next file). A call
// waits for a slot; its timeout starts once it has one. A nil *Processes
// bounds nothing (tests, the simulator).
type Processes struct{ slots chan struct{} }

// NewProcesses allows n processes at once (at least one).
func NewProcesses(n int) *Processes { return &Processes{slots: make(chan struct{}, max(n, 1))} }

// Start waits for a slot: the returned func gives it back. A context
// done first is a transient failure: the caller's next try waits again.
func (p *Processes) Start(ctx context.Context, name string) (func(), error) {
	if p == nil {
		return func() {}, nil
	}
	select {
	case p.slots <- struct{}{}:
		return func() { <-p.slots }, nil
	case <-ctx.Done():
		return nil, errorf(Transient, "%s: waited for one of the %d driver processes allowed at once: %v", name, cap(p.slots), ctx.Err())
	}
}

// Cap is how many processes may run at once.
func (p *Processes) Cap() int {
	if p == nil {
		return 0
	}
	return cap(p.slots)
}
