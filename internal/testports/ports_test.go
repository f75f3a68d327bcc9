package testports

import (
	"strconv"
	"strings"
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
