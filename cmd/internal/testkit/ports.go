package testkit

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// StablePort is a loopback address for a process that is killed and
// restarted on the same port. A port from ":0" is an ephemeral one: while
// the process is down the kernel may hand it to anything that connects or
// listens on ":0" (another test, a driver's own application, the
// harness's polling client), and the restart then fails to listen. This
// one lies below the ephemeral range, which the kernel never hands out.
func StablePort() (string, error) {
	low := ephemeralLow()
	const floor = 10000
	if low <= floor+1000 {
		return "", fmt.Errorf("the ephemeral range starts at %d: no room below it", low)
	}
	handedMu.Lock()
	defer handedMu.Unlock()
	for range 200 {
		port := floor + rand.IntN(low-floor)
		addr := "127.0.0.1:" + strconv.Itoa(port)
		if handed[port] {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		handed[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("no free port in %d..%d", floor, low)
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

// handed are the ports this process gave out: never twice.
var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
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

// Tail is the last n lines of a file, for saying why a process failed.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
