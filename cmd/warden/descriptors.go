package main

import (
	"fmt"
	"log/slog"
	"syscall"

	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
)

// The process's file descriptors (S13), split once at start so that
// clients can never take the ones the store needs. RLIMIT_NOFILE's soft
// limit is raised to the hard one; then, of that many:
//
//   - Pebble keeps at most storeTables sstables open (a quarter, 16 to
//     1000: its default);
//   - kept are left for everything else of the process: the WAL, the
//     manifest, the locks and the mark, the listener and its poller,
//     standard streams (a quarter, 24 to 64);
//   - shed connections are accepted only to be answered 503 overloaded
//     with Retry-After (a sixteenth, 4 to 64);
//   - the drivers' share: seven descriptors for each driver process
//     allowed at once (a sixty-fourth of the limit, 1 to 256), which
//     outbound connections (one each) spend too; a call past it waits;
//   - the rest serve connections; beyond serve and shed, new ones wait in
//     the kernel's backlog.
//
// And spareWAL descriptors are held open for the store alone: if the
// process runs out anyway, the next write-ahead log still opens, and the
// store seals (S1-S3, exit 74) instead of Pebble panicking.
type fdBudget struct {
	limit, raisedFrom              int
	storeTables, kept, shed, serve int
	drivers                        int // driver processes at once
}

const (
	minServe = 8
	spareWAL = 2
	// maxServe bounds the connections served at once however many
	// descriptors there are: one goroutine and two buffers each.
	maxServe = 1 << 16
)

func planDescriptors() (fdBudget, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return fdBudget{}, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	b := fdBudget{raisedFrom: int(r.Cur)}
	if r.Cur < r.Max {
		raised := r
		raised.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			r = raised
		}
	}
	b.limit = int(min(r.Cur, 1<<30))
	b.storeTables = clamp(b.limit/4, 16, 1000)
	b.kept = clamp(b.limit/4, 24, 64)
	b.shed = clamp(b.limit/16, 4, 64)
	b.drivers = clamp(b.limit/64, 1, 256)
	b.serve = min(b.limit-b.storeTables-b.kept-b.shed-spareWAL-b.drivers*driver.DescriptorsPerProcess, maxServe)
	if b.serve < minServe {
		return b, configError(fmt.Errorf("RLIMIT_NOFILE is %d: warden needs at least %d file descriptors (16 for the store's tables, 24 for its other files and the listener, %d held for the store's log, 4 to refuse connections with, %d for a driver process and %d to serve connections); raise it (ulimit -n, LimitNOFILE=)",
			b.limit, 16+24+spareWAL+4+driver.DescriptorsPerProcess+minServe, spareWAL, driver.DescriptorsPerProcess, minServe))
	}
	return b, nil
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

func (b fdBudget) conns() httpapi.ConnLimit { return httpapi.ConnLimit{Serve: b.serve, Shed: b.shed} }

func (b fdBudget) log(l *slog.Logger) {
	l.Info("file descriptors", "limit", b.limit, "soft_limit_was", b.raisedFrom, "store_tables", b.storeTables, "kept", b.kept,
		"held_for_the_wal", spareWAL, "connections_served", b.serve, "then_refused_with_503", b.shed,
		"driver_processes_at_once", b.drivers, "driver_descriptors", b.driverDescriptors())
}

// driverDescriptors are the drivers' share: a process's descriptors for
// each process allowed at once, which outbound connections, one each,
// share with them.
func (b fdBudget) driverDescriptors() int { return b.drivers * driver.DescriptorsPerProcess }
