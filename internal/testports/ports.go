// Package testports hands tests, harnesses and benchmarks loopback ports
// that stay theirs: for a process they start (etcd, Caddy, warden) that
// binds after the port was chosen, or is restarted on it. Every package
// that starts such a process takes its ports here.
package testports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// StablePort is a loopback address for a process that is killed and
// restarted on the same port. A port from ":0" is an ephemeral one: while
// the process is down the kernel may hand it to anything that connects or
// listens on ":0" (another test, a driver's own application, the
// harness's polling client), and the restart then fails to listen. This
// one lies below the ephemeral range, which the kernel never hands out,
// and below the preview applications' ports (from appPortCeiling).
//
// go test runs packages as parallel processes that all pick from this
// range, so a port is reserved for the whole machine while the process
// that took it lives: a lock on a file named for it, which the kernel
// drops when that process exits, however it exits. Checking that a port
// could be bound was not enough: a cluster node failed to start with
// "bind: address already in use" when another package's test took its
// port between the check and the node's start.
func StablePort() (string, error) {
	ceiling := min(ephemeralLow(), appPortCeiling)
	const floor = 10000
	if ceiling <= floor+1000 {
		return "", fmt.Errorf("ports below %d: no room above %d", ceiling, floor)
	}
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 200 {
		port := floor + rand.IntN(ceiling-floor)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if handed[port] != nil || !reserve(port) {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // kept reserved: something else holds it
		}
		ln.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free port in %d..%d", floor, ceiling)
}

// appPortCeiling is where the local driver's preview applications'
// ports begin (internal/driver/local, appPortBase): the tests start
// preview applications too.
const appPortCeiling = 20000

// reserve takes port for this process's lifetime, unless another live
// process holds it; the lock's file stays open in handed until exit.
func reserve(port int) bool {
	dir := filepath.Join(os.TempDir(), "warden-testkit-ports")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return false
	}
	handed[port] = f
	return true
}

// StablePorts sets each address to a StablePort.
func StablePorts(addrs ...*string) error {
	for _, a := range addrs {
		addr, err := StablePort()
		if err != nil {
			return err
		}
		*a = addr
	}
	return nil
}

// handed are the ports this process reserved, with their locks: never
// handed out twice.
var (
	handedMu sync.Mutex
	handed   = map[int]*os.File{}
)

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768 // Linux's default
}

// Hold waits until this process holds the machine-wide lock name, and
// returns what releases it: for tests that must listen on fixed ports
// (make cluster's) or name things machine-wide (podman's containers, by
// their environments' ids), so that two test runs on one machine take
// turns instead of one failing. Within a process it is shared (the tests
// of one package coordinate as they always have); the lock is released
// when its last holder releases it, and by the kernel if the process dies.
func Hold(name string) (release func(), err error) {
	holds.Lock()
	defer holds.Unlock()
	h := holds.m[name]
	if h == nil {
		dir := filepath.Join(os.TempDir(), "warden-testkit-ports")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(filepath.Join(dir, "hold-"+name), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, err
		}
		h = &hold{f: f}
		holds.m[name] = h
	}
	h.n++
	var once sync.Once
	return func() {
		once.Do(func() {
			holds.Lock()
			defer holds.Unlock()
			if h.n--; h.n == 0 {
				h.f.Close()
				delete(holds.m, name)
			}
		})
	}, nil
}

// holds are the machine-wide locks this process holds, and how many of
// its callers hold each.
var holds = struct {
	sync.Mutex
	m map[string]*hold
}{m: map[string]*hold{}}

type hold struct {
	f *os.File
	n int
}
