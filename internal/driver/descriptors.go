package driver

import (
	"context"
	"net"
	"net/http"
	"sync"

	"golang.org/x/sync/semaphore"
)

// DescriptorsPerProcess is what one driver process holds of warden's
// descriptors while it starts: three pipes (stdin, stdout, stderr) both
// ends until the fork is done, and the pidfd Go waits on.
const DescriptorsPerProcess = 7

// Descriptors is the share of warden's descriptors its drivers may hold
// at once (S13): a driver process takes DescriptorsPerProcess while it
// runs, an outbound connection (GitHub, a notification, the control
// plane, a bootstrap probe, the local platform's Caddy, health checks and
// PostgreSQL) one while it is open. Without a bound, a
// round over many environments or a burst of dispatches started a process
// or opened a socket each at once and took the descriptors the listener
// and the store were kept (found under `ulimit -n 64`: slow exec
// dispatches failed "pipe2: too many open files", slow GitHub ones
// "socket: too many open files"). A call past the bound waits: a
// process's timeout starts once it runs, an outbound call waits within
// its client's. A nil *Descriptors bounds nothing (tests, the
// simulator).
type Descriptors struct {
	sem *semaphore.Weighted
	n   int64
	mu  sync.Mutex
	// idle closes the connections kept for reuse by the transports that
	// dial through this bound: a call that must wait frees those first.
	idle []func()
}

// NewDescriptors allows n descriptors at once (at least one process's).
func NewDescriptors(n int) *Descriptors {
	n = max(n, DescriptorsPerProcess)
	return &Descriptors{sem: semaphore.NewWeighted(int64(n)), n: int64(n)}
}

// take waits for n descriptors; the returned func gives them back once.
func (d *Descriptors) take(ctx context.Context, n int64, what string) (func(), error) {
	if d == nil {
		return func() {}, nil
	}
	if !d.sem.TryAcquire(n) {
		d.closeIdle()
		if err := d.sem.Acquire(ctx, n); err != nil {
			return nil, errorf(Transient, "%s: waited for %d of the %d descriptors drivers may hold at once: %v", what, n, d.n, err)
		}
	}
	return sync.OnceFunc(func() { d.sem.Release(n) }), nil
}

func (d *Descriptors) closeIdle() {
	d.mu.Lock()
	idle := append([]func(){}, d.idle...)
	d.mu.Unlock()
	for _, f := range idle {
		f()
	}
}

// Start waits for a process's descriptors: the returned func gives them
// back. A context done first is a transient failure: the caller's next
// try waits again.
func (d *Descriptors) Start(ctx context.Context, name string) (func(), error) {
	return d.take(ctx, DescriptorsPerProcess, name)
}

// Connections waits for the descriptors of a call that opens up to n
// connections of its own (a database driver's, dialing through its
// library): the returned func gives them back. They are taken together:
// calls that each held one connection while waiting for a second would,
// enough of them at once, hold the whole share and wait for ever.
func (d *Descriptors) Connections(ctx context.Context, n int, what string) (func(), error) {
	return d.take(ctx, int64(n), what)
}

// DialContext opens a connection holding one descriptor of the bound
// until it is closed.
func (d *Descriptors) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	done, err := d.take(ctx, 1, "dial "+addr)
	if err != nil {
		return nil, err
	}
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		done()
		return nil, err
	}
	return &heldConn{Conn: c, done: done}, nil
}

// heldConn gives its descriptor back when closed.
type heldConn struct {
	net.Conn
	done func()
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.done()
	return err
}

// Transport is http.DefaultTransport's settings dialing through d, its
// idle connections closed when a driver waits for descriptors (and, as
// CloseIdleConnections does, those that go idle after, until the
// transport's next request).
func (d *Descriptors) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if d == nil {
		return t
	}
	t.DialContext = d.DialContext
	d.mu.Lock()
	d.idle = append(d.idle, t.CloseIdleConnections)
	d.mu.Unlock()
	return t
}
