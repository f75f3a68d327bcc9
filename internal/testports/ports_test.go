package testports

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStablePortIsReservedForTheMachine: a port one test process took is
// not handed to another while the first lives, and is free again once it
// exits. The lock is held per open file, so a second open here stands in
// for another process.
func TestStablePortIsReservedForTheMachine(t *testing.T) {
	addr, err := StablePort()
	require.NoError(t, err)
	_, p, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(p)
	require.NoError(t, err)
	require.Less(t, port, appPortCeiling, "below the preview applications' ports")

	handedMu.Lock()
	defer handedMu.Unlock()
	first := handed[port]
	delete(handed, port)
	require.False(t, reserve(port), "a port another process holds was reserved again")
	first.Close() // the process that took it exits
	require.True(t, reserve(port), "a port no process holds was not reserved")
}

// TestHoldIsMachineWideAndSharedWithinAProcess: while this process holds a
// name, another holder on the machine (another open of its lock file)
// cannot take it; two holders in this process share it, and it is free
// once both release it.
func TestHoldIsMachineWideAndSharedWithinAProcess(t *testing.T) {
	name := "test-" + strconv.Itoa(os.Getpid())
	first, err := Hold(name)
	require.NoError(t, err)
	second, err := Hold(name)
	require.NoError(t, err, "shared within a process, not a deadlock")
	other, err := os.OpenFile(filepath.Join(os.TempDir(), "warden-testkit-ports", "hold-"+name), os.O_RDWR, 0o600)
	require.NoError(t, err)
	defer other.Close()
	require.Error(t, syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "held machine-wide")
	first()
	first() // a release is once
	require.Error(t, syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "still held by the second")
	second()
	require.NoError(t, syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), "free once both released it")
}
