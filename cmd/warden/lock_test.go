package main

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAClosedDataDirLockIsFreeWhileACopyOfItsDescriptorLives: a
// directory's lock, once closed, can be taken again at once even while a
// copy of its descriptor is still open, as it is in a child between fork
// and exec (a dup stands for the child here). Closing the file alone left
// it locked: make test saw keygen for a second node refused, "in use by"
// its own process, while a parallel test started processes.
func TestAClosedDataDirLockIsFreeWhileACopyOfItsDescriptorLives(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDataDir(dir)
	require.NoError(t, err)
	child, err := syscall.Dup(int(lock.f.Fd()))
	require.NoError(t, err)
	defer syscall.Close(child)
	_, err = lockDataDir(dir)
	require.ErrorContains(t, err, "is in use by", "held while open")
	require.NoError(t, lock.Close())
	again, err := lockDataDir(dir)
	require.NoError(t, err, "free once closed, whatever copies of its descriptor live")
	require.NoError(t, again.Close())
}
