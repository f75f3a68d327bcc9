package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockName is the file in the data directory that says which warden holds
// it. Pebble locks its own files too, but only once the store opens, after
// warden has started listening; this lock is taken first, so a second
// warden on the same directory refuses before it listens and names the
// process that holds it.
const lockName = "warden.lock"

// takeDataDir makes the data directory private (prepareDataDir) and locks
// it for this process (lockDataDir): what every command that writes a
// data directory does first.
func takeDataDir(dir string) (*dirLock, error) {
	if err := prepareDataDir(dir); err != nil {
		return nil, err
	}
	return lockDataDir(dir)
}

// dirLock is a data directory's lock, held until Close or the process's
// exit (the kernel drops it with the process, kill -9 included).
type dirLock struct{ f *os.File }

// Close unlocks before it closes. Closing alone would leave the lock
// held while any copy of the descriptor lives, and a child this process
// is starting holds one between its fork and its exec: a command that
// took the directory just after (keygen for the next node, in a test
// that starts processes beside it) was refused, "in use by" this very
// process.
func (l *dirLock) Close() error {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// lockDataDir takes the data directory for this process until the lock
// is closed or the process exits.
func lockDataDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, syscall.EROFS) {
		// A read-only filesystem: the store opens read-only; the lock
		// still keeps a second warden out, without the note.
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another warden"
			}
			return nil, fmt.Errorf("data directory %s is in use by %s; stop it first or use another --data", dir, who)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	host, _ := os.Hostname()
	note := "warden pid " + strconv.Itoa(os.Getpid()) + " on " + host + " since " + time.Now().UTC().Format(time.RFC3339)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(note+"\n"), 0)
		_ = f.Sync()
	}
	return &dirLock{f}, nil
}

// lockToRead keeps a serving warden out of dir while a command only reads
// it (verify, a migration's source), without writing anything: the lock
// file is opened only if a warden ever made it, and its note is left as
// it is. A directory no warden served from has nothing to keep out.
func lockToRead(dir string) (*dirLock, error) {
	f, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(filepath.Join(dir, lockName))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another warden"
			}
			return nil, fmt.Errorf("data directory %s is in use by %s; stop it first or use another --data", dir, who)
		}
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return &dirLock{f}, nil
}
