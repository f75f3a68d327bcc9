package persistence

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Space is what the data directory's filesystem has.
type Space struct {
	Free, Total uint64
}

// FreeSpace reads the space of dir's filesystem: what an unprivileged
// writer may still use, and the whole.
func FreeSpace(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return Space{Free: uint64(st.Bavail) * bs, Total: uint64(st.Blocks) * bs}, nil
}

// minWritable is the least free space a store opens read-write with:
// below it, a WAL rotation or a flush could not be written, and a store
// opened read-write would seal at its first flush and restart in a loop.
const minWritable = 8 << 20

// probeSize is what the probe writes and syncs: a few of the WAL's blocks.
const probeSize = 128 << 10

// probeWritable shows that dir's filesystem takes a synced write now,
// without touching the store: a probe that fails leaves no Pebble wedged
// on a write it could not make. The failure names the cause.
func probeWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &Failure{Cause: Classify(err), Op: "open", Err: err}
	}
	if sp, err := FreeSpace(dir); err == nil && sp.Free < minWritable {
		return &Failure{Cause: DiskFull, Op: "open", Err: fmt.Errorf("%d bytes free in %s, fewer than the %d a store needs to open read-write", sp.Free, dir, minWritable)}
	}
	name := filepath.Join(dir, ".warden-probe")
	fail := func(err error) error {
		_ = os.Remove(name)
		return &Failure{Cause: Classify(err), Op: "open", Err: err}
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	if _, err := f.Write(make([]byte, probeSize)); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Remove(name); err != nil {
		return fail(err)
	}
	return nil
}

// DefaultReserveFraction and DefaultReserveMin make the default space
// reserve: the larger of 1% of the filesystem and 256 MiB, room for
// the lifecycles already under way to finish (a few KiB a transition, and
// a memtable flush of 64 MiB) after new work is refused.
const (
	DefaultReserveFraction = 100
	DefaultReserveMin      = 256 << 20
)

// Reserve refuses new work while the data directory's filesystem has less
// free space than Bytes; zero Bytes is the default reserve.
type Reserve struct {
	Dir   string
	Bytes uint64
}

// Of is the reserve in bytes on a filesystem of this size.
func (r Reserve) Of(total uint64) uint64 {
	if r.Bytes > 0 {
		return r.Bytes
	}
	return max(total/DefaultReserveFraction, DefaultReserveMin)
}

// Check is nil while new work may start, and ErrStorageLow, with the
// figures, below the reserve. A filesystem it cannot read does not refuse
// work: the write path tells of a real problem itself.
func (r Reserve) Check() error {
	sp, err := FreeSpace(r.Dir)
	if err != nil {
		return nil
	}
	if reserve := r.Of(sp.Total); sp.Free < reserve {
		return fmt.Errorf("%w: %d MiB free in %s, below the reserve of %d MiB kept for lifecycles under way; free space, or lower --storage-reserve",
			ErrStorageLow, sp.Free>>20, r.Dir, reserve>>20)
	}
	return nil
}
