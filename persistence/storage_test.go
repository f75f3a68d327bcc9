package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/persistence/faultfs"
)

// The disk's failures under the real Pebble (docs/rules/storage.md,
// S1-S11): errors injected with Pebble's own errorfs at each write and
// sync site, damage made by flipping bytes in real files.

// disk is an injector that fails (or holds) the next operation of one
// kind on files whose names end with suffix, once armed.
type disk struct {
	mu     sync.Mutex
	suffix string
	kinds  []errorfs.OpKind
	err    error
	// hold, if set, blocks the matched op until it is closed; then err (nil:
	// the op goes ahead).
	hold chan struct{}
	// held is closed once an op is being held.
	held  chan struct{}
	fired atomic.Int32
	after atomic.Int32 // ops of the kind seen after firing
}

func (d *disk) String() string { return "test disk" }

func (d *disk) arm(suffix string, err error, kinds ...errorfs.OpKind) {
	d.mu.Lock()
	d.suffix, d.err, d.kinds = suffix, err, kinds
	d.mu.Unlock()
}

func (d *disk) MaybeError(op errorfs.Op) error {
	d.mu.Lock()
	match := d.suffix != "" && strings.HasSuffix(op.Path, d.suffix)
	kindOK := false
	for _, k := range d.kinds {
		kindOK = kindOK || op.Kind == k
	}
	if !match || !kindOK {
		if d.fired.Load() > 0 && strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSync) {
			d.after.Add(1)
		}
		d.mu.Unlock()
		return nil
	}
	d.suffix = ""
	err, hold, held := d.err, d.hold, d.held
	d.mu.Unlock()
	d.fired.Add(1)
	if hold != nil {
		close(held)
		<-hold
	}
	return err
}

var walWrite = []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt}
var anySync = []errorfs.OpKind{errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo}

// productionStore opens a store on an in-memory disk behind d, failing
// as production does: Pebble's own Fatalf blocks, a commit whose sync
// failed is refused.
func productionStore(t *testing.T, d *disk, o Options) (*Store, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	o.FS = faultfs.Wrap(mem, d)
	s, err := Open("db", o)
	require.NoError(t, err)
	return s, mem
}

// faultyStore is productionStore with an OnFatal hook that signals fatal
// and then blocks, wherever a write-path failure sealed the store.
func faultyStore(t *testing.T, d *disk, o Options) (*Store, *vfs.MemFS, chan struct{}) {
	t.Helper()
	fatal := make(chan struct{})
	var once sync.Once
	o.OnFatal = func() { once.Do(func() { close(fatal) }); select {} }
	s, mem := productionStore(t, d, o)
	return s, mem, fatal
}

func put(s *Store, key, val string) error {
	b := s.NewBatch()
	b.Set([]byte(key), []byte(val))
	return b.Commit()
}

// commitAsync commits in the background: a commit whose write failed
// never returns from a blocking OnFatal.
func commitAsync(s *Store, key string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- put(s, key, "\x01{}") }()
	return done
}

// walFaults are the write-ahead log's failures, each with the cause a
// seal names.
var walFaults = []struct {
	name  string
	kinds []errorfs.OpKind
	errno syscall.Errno
	cause Cause
}{
	{"WAL write, disk full", walWrite, syscall.ENOSPC, DiskFull},
	{"WAL write, read-only filesystem", walWrite, syscall.EROFS, ReadOnly},
	{"WAL sync, I/O error", anySync, syscall.EIO, IOError},
}

func TestS1AFailedWALWriteOrSyncSealsTheStore(t *testing.T) {
	for _, tc := range walFaults {
		t.Run(tc.name, func(t *testing.T) {
			d := &disk{}
			s, _ := productionStore(t, d, Options{})
			require.NoError(t, put(s, "m/before", "\x01{}"))
			d.arm(".log", fmt.Errorf("injected: %w", tc.errno), tc.kinds...)
			var refused *Failure
			select {
			case err := <-commitAsync(s, "m/refused"):
				require.ErrorAs(t, err, &refused, "a commit whose WAL %s failed is refused, with the seal's failure (S1)", tc.name)
			case <-time.After(10 * time.Second):
				t.Fatalf("a commit whose WAL %s failed never returned: its caller would never be answered (S2)", tc.name)
			}
			f := s.Health().Failed()
			require.NotNil(t, f, "the store is sealed")
			require.Same(t, f, refused, "the commit reports the seal itself")
			require.Equal(t, tc.cause, f.Cause)
			require.ErrorIs(t, f, ErrStorage)

			// Nothing is attempted afterwards: refused at once, before Pebble.
			err := put(s, "m/after", "\x01{}")
			var got *Failure
			require.ErrorAs(t, err, &got)
			require.Equal(t, tc.cause, got.Cause)
			require.Zero(t, d.after.Load(), "no WAL operation after the seal")
			// S5: the memtable may hold the refused batch; reads are refused.
			var v struct{}
			err = s.Get([]byte("m/before"), &v)
			require.ErrorAs(t, err, &got)
			require.Error(t, s.Close(), "a sealed store is not closed (S3)")
		})
	}
}

func TestS1AFailedFlushOrManifestWriteSealsTheStore(t *testing.T) {
	for _, tc := range []struct {
		name, suffix string
		kinds        []errorfs.OpKind
		errno        syscall.Errno
	}{
		{"flush: the sstable's write", ".sst", walWrite, syscall.ENOSPC},
		{"flush: the sstable's sync", ".sst", anySync, syscall.EIO},
		{"manifest write after the flush", "MANIFEST-000001", walWrite, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &disk{}
			s, _, fatal := faultyStore(t, d, Options{})
			for i := range 50 {
				require.NoError(t, put(s, fmt.Sprintf("m/k-%03d", i), "\x01{}"))
			}
			d.arm(tc.suffix, fmt.Errorf("injected: %w", tc.errno), tc.kinds...)
			go func() { _ = s.Flush() }() // a failing flush may wait for ever
			select {
			case <-s.Health().Sealed():
			case <-fatal:
			case <-time.After(10 * time.Second):
				t.Fatal("the failed flush did not seal the store")
			}
			f := s.Health().Failed()
			require.NotNil(t, f)
			require.Equal(t, Classify(tc.errno), f.Cause)
			require.ErrorAs(t, put(s, "m/after", "\x01{}"), new(*Failure))
		})
	}
}

func TestS1ACompactionFailureSealsTheStore(t *testing.T) {
	d := &disk{}
	s, _, _ := faultyStore(t, d, Options{})
	for round := range 3 {
		for i := range 20 {
			require.NoError(t, put(s, fmt.Sprintf("m/k-%03d", i), fmt.Sprintf("\x01{\"r\":%d}", round)))
		}
		require.NoError(t, s.Flush())
	}
	d.arm(".sst", fmt.Errorf("injected: %w", syscall.ENOSPC), walWrite...)
	db := s.kv.(*pebbleBackend).db
	go func() { _ = db.Compact(context.Background(), []byte("a"), []byte("z"), true) }()
	select {
	case <-s.Health().Sealed():
	case <-time.After(10 * time.Second):
		t.Fatal("the failed compaction did not seal the store")
	}
	require.Equal(t, DiskFull, s.Health().Failed().Cause)
}

func TestS1AReplayThatCannotReadIsAFailureNotAPanic(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: mem})
	require.NoError(t, err)
	require.NoError(t, put(s, "m/a", "\x01{}"))
	require.NoError(t, s.Close())
	d := &disk{}
	d.arm(".log", fmt.Errorf("injected: %w", syscall.EIO), errorfs.OpFileRead, errorfs.OpFileReadAt)
	_, err = Open("db", Options{FS: faultfs.Wrap(mem, d)})
	var f *Failure
	require.ErrorAs(t, err, &f, "a replay that cannot read says so")
	require.Equal(t, IOError, f.Cause)
	require.Contains(t, f.Error(), "I/O error")
}

func TestS5NoReadShowsAWriteBeforeItsSyncReturns(t *testing.T) {
	for _, syncFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync fails %v", syncFails), func(t *testing.T) {
			d := &disk{hold: make(chan struct{}), held: make(chan struct{})}
			s, _ := productionStore(t, d, Options{})
			var err error
			if syncFails {
				err = fmt.Errorf("injected: %w", syscall.EIO)
			}
			d.arm(".log", err, anySync...)
			done := commitAsync(s, "m/x")
			<-d.held // the batch is written and in the memtable; its sync waits

			read := make(chan error, 1)
			go func() {
				_, err := s.Deliveries("x", InRecord{})
				read <- s.Get([]byte("m/x"), new(map[string]any))
				_ = err
			}()
			select {
			case err := <-read:
				t.Fatalf("a read answered (%v) while the write it may have seen was not synced", err)
			case <-time.After(200 * time.Millisecond):
			}
			close(d.hold)
			if syncFails {
				var f *Failure
				require.ErrorAs(t, <-done, &f, "the write never became durable: its commit is refused")
				require.ErrorAs(t, <-read, &f, "the write never became durable: the read is refused, not answered with it")
				return
			}
			require.NoError(t, <-done)
			require.NoError(t, <-read, "once synced, the read answers with it")
		})
	}
}

func TestS6StoresAreAtTheNewestFormatAndOldOnesRatchet(t *testing.T) {
	mem := vfs.NewCrashableMem()
	old := pebble.FormatFlushableIngestExcises
	db, err := pebble.Open("db", &pebble.Options{FS: mem, FormatMajorVersion: old})
	require.NoError(t, err)
	require.NoError(t, db.Set([]byte("m/kept"), []byte("\x01{}"), pebble.Sync))
	require.NoError(t, db.Close())

	var logs bytes.Buffer
	s, err := Open("db", Options{FS: mem, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.Equal(t, FormatVersion, s.kv.(*pebbleBackend).db.FormatMajorVersion())
	require.GreaterOrEqual(t, FormatVersion, pebble.FormatWALSyncChunks)
	require.Equal(t, 1, strings.Count(logs.String(), "store format ratcheted"), logs.String())
	require.NoError(t, s.Get([]byte("m/kept"), new(map[string]any)))
	require.NoError(t, s.Close())

	logs.Reset()
	s, err = Open("db", Options{FS: mem, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NotContains(t, logs.String(), "ratcheted", "said once, when it happens")
	require.NoError(t, s.Close())
}

// writeStore writes n acknowledged records to a real directory and leaves
// it as a crash would (killed, not closed: a clean close flushes, and its
// WAL would hold nothing), its high-water mark from before the writes; it
// returns the newest WAL's path.
func writeStore(t *testing.T, dir string, n int) string {
	t.Helper()
	live := t.TempDir()
	s, err := Open(live, Options{MarkEvery: -1})
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, put(s, fmt.Sprintf("m/x-%04d", i), fmt.Sprintf("\x01{\"i\":%d,\"pad\":\"%0200d\"}", i, i)))
	}
	crashImage(t, live, dir)
	require.NoError(t, s.Close())
	return newestWAL(t, dir)
}

// crashImage copies a live store's directory as a kill -9 leaves it:
// every commit was synced, so the files as they are now are what survives.
func crashImage(t *testing.T, live, dir string) {
	t.Helper()
	entries, err := os.ReadDir(live)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(live, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
	}
}

func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NotEmpty(t, logs)
	return logs[len(logs)-1]
}

func countRecords(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	require.NoError(t, s.ForEach(func(k, _ []byte) error {
		if bytes.HasPrefix(k, []byte("m/")) {
			n++
		}
		return nil
	}))
	return n
}

func TestS6ATornTailIsToleratedAndEverythingBeforeItKept(t *testing.T) {
	dir := t.TempDir()
	wal := writeStore(t, dir, 240)
	st, err := os.Stat(wal)
	require.NoError(t, err)
	// A crash in the middle of the last write: its end never reached the
	// disk.
	require.NoError(t, os.Truncate(wal, st.Size()-100))
	s, err := Open(dir, Options{})
	require.NoError(t, err, "a torn tail is tolerated")
	require.Equal(t, 239, countRecords(t, s), "every record before the torn one is kept")
	require.NoError(t, s.Close())
}

func flip(t *testing.T, path string, at int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for i := range int64(16) {
		b[at+i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(path, b, 0o600))
}

func TestS7AWALDamagedInTheMiddleIsRefusedNamingTheFile(t *testing.T) {
	for _, where := range []string{"first block", "last block"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			wal := writeStore(t, dir, 240)
			st, err := os.Stat(wal)
			require.NoError(t, err)
			at := st.Size() / 2 // the middle: the first 32 KiB block of two
			if where == "last block" {
				at = st.Size() - 2000 // Pebble's own check never looks here
			}
			flip(t, wal, at)
			_, err = Open(dir, Options{})
			var c *CorruptStoreError
			require.ErrorAs(t, err, &c, "damage in the middle is not a torn tail")
			require.Equal(t, filepath.Base(wal), c.WAL)
			for _, want := range []string{filepath.Base(wal), "warden verify", "--accept-data-loss", "restore"} {
				require.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestS7AcceptDataLossTruncatesKeepsTheOriginalAndAudits(t *testing.T) {
	dir := t.TempDir()
	wal := writeStore(t, dir, 240)
	st, err := os.Stat(wal)
	require.NoError(t, err)
	flip(t, wal, st.Size()/2)
	var logs bytes.Buffer
	s, err := Open(dir, Options{AcceptDataLoss: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer s.Close()
	n := countRecords(t, s)
	require.Greater(t, n, 50)
	require.Less(t, n, 240, "what follows the damage is dropped, explicitly")
	kept, err := os.Stat(wal + ".damaged")
	require.NoError(t, err, "the damaged log is kept beside the store")
	require.Equal(t, st.Size(), kept.Size())
	var audits []string
	require.NoError(t, s.ForEach(func(k, v []byte) error {
		if bytes.HasPrefix(k, []byte("z/data-loss/")) {
			audits = append(audits, string(v))
		}
		return nil
	}))
	require.Len(t, audits, 1, "one audit entry says what was dropped")
	require.Contains(t, audits[0], filepath.Base(wal))
	require.Contains(t, audits[0], "bytes_dropped")
	require.Contains(t, logs.String(), "data loss accepted")
}

func TestS7ACorruptSSTableRefusesItsKeysWithoutAPanic(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	for i := range 2000 {
		require.NoError(t, put(s, fmt.Sprintf("m/x-%04d", i), fmt.Sprintf("\x01{\"i\":%d,\"pad\":\"%0200d\"}", i, i)))
	}
	require.NoError(t, s.Flush())
	require.NoError(t, s.Close())
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.Len(t, ssts, 1)
	st, _ := os.Stat(ssts[0])
	flip(t, ssts[0], st.Size()/3)

	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer s.Close()
	var bad *Failure
	for i := range 2000 {
		if err := s.Get(fmt.Appendf(nil, "m/x-%04d", i), new(map[string]any)); err != nil {
			require.ErrorAs(t, err, &bad)
			break
		}
	}
	require.NotNil(t, bad, "a read of the damaged block fails")
	require.Equal(t, Corrupted, bad.Cause)
	require.Contains(t, bad.Error(), filepath.Base(ssts[0]), "the message names the file")
}

func TestS8PebbleMessagesAreKeptInTheLog(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := &disk{}
	s, _ := productionStore(t, d, Options{Logger: log})
	require.NoError(t, put(s, "m/a", "\x01{}"))
	require.NoError(t, s.Flush())
	require.Contains(t, logs.String(), `"level":"DEBUG"`)
	require.Contains(t, logs.String(), `"component":"pebble"`)
	require.Contains(t, logs.String(), "flushed", "Pebble's routine events are kept, at debug")
	d.arm(".log", fmt.Errorf("injected: %w", syscall.ENOSPC), walWrite...)
	require.ErrorAs(t, put(s, "m/b", "\x01{}"), new(*Failure), "refused with the seal's failure")
	require.Equal(t, 1, strings.Count(logs.String(), "storage failed"), "one ERROR line with the cause (S2)")
	require.Contains(t, logs.String(), `"level":"ERROR"`)
	require.Contains(t, logs.String(), `"cause":"disk full"`)
}

func TestS4AStoreThatCannotBeWrittenOpensReadOnlyAndSwitchesBack(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: mem})
	require.NoError(t, err)
	require.NoError(t, put(s, "m/kept", "\x01{}"))
	require.NoError(t, s.Close())

	d := &disk{}
	// The filesystem refuses every new file: Pebble cannot open read-write.
	d.arm("", fmt.Errorf("injected: %w", syscall.EROFS), errorfs.OpCreate, errorfs.OpReuseForWrite, errorfs.OpMkdirAll)
	d.mu.Lock()
	d.suffix = "db" // any path under the store
	d.mu.Unlock()
	ro := &sticky{d: d}
	s, err = Open("db", Options{FS: faultfs.Wrap(mem, ro), Degrade: true})
	require.NoError(t, err, "opened read-only instead of refused")
	defer s.Close()
	f := s.Health().ReadOnly()
	require.NotNil(t, f)
	require.Equal(t, ReadOnly, f.Cause)
	require.NoError(t, s.Get([]byte("m/kept"), new(map[string]any)), "reads are served")
	var got *Failure
	require.ErrorAs(t, put(s, "m/new", "\x01{}"), &got, "writes are refused")
	require.True(t, got.Degraded)

	ok, err := s.TryWritable()
	require.NoError(t, err)
	require.False(t, ok, "still read-only")
	ro.off.Store(true)
	ok, err = s.TryWritable()
	require.NoError(t, err)
	require.True(t, ok, "writable again: switched without a restart")
	require.Nil(t, s.Health().Problem())
	require.NoError(t, put(s, "m/new", "\x01{}"))
	require.Equal(t, 2, countRecords(t, s), "nothing lost, nothing twice")
}

// sticky fails every write-kind op under its disk's rule until off.
type sticky struct {
	d   *disk
	off atomic.Bool
}

func (s *sticky) String() string { return "read-only disk" }

func (s *sticky) MaybeError(op errorfs.Op) error {
	if s.off.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite || op.Kind == errorfs.OpLock || op.Kind == errorfs.OpFileClose {
		return nil
	}
	return fmt.Errorf("injected: %w", syscall.EROFS)
}

func TestS9TheReserveRefusesNewWorkBelowIt(t *testing.T) {
	dir := t.TempDir()
	sp, err := FreeSpace(dir)
	require.NoError(t, err)
	require.Positive(t, sp.Free)
	require.NoError(t, Reserve{Dir: dir, Bytes: 1}.Check())
	err = Reserve{Dir: dir, Bytes: sp.Total * 2}.Check()
	require.ErrorIs(t, err, ErrStorageLow)
	require.Contains(t, err.Error(), "--storage-reserve")
	require.Equal(t, uint64(DefaultReserveMin), Reserve{}.Of(10<<30), "256 MiB on a 10 GiB disk")
	require.Equal(t, uint64(1<<40)/100, Reserve{}.Of(1<<40), "1% of a 1 TiB disk")
}

func TestClassifyNamesEachCause(t *testing.T) {
	for errno, want := range map[syscall.Errno]Cause{syscall.ENOSPC: DiskFull, syscall.EDQUOT: DiskFull,
		syscall.EROFS: ReadOnly, syscall.EIO: IOError, syscall.EPERM: Other} {
		require.Equal(t, want, Classify(fmt.Errorf("wrapped: %w", errno)), errno.Error())
	}
	require.Equal(t, Other, Classify(errors.New("plain")))
}

// FuzzCheckNewestWAL: the WAL check reads bytes from the disk, which may
// be anything; it must never panic, and only ever answer nil, a
// corruption, or a read failure.
func FuzzCheckNewestWAL(f *testing.F) {
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 100))
	f.Add(append(make([]byte, 7), 9, 4, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("db", 0o700))
		file, err := mem.Create("db/000004.log", vfs.WriteCategoryUnspecified)
		require.NoError(t, err)
		_, _ = file.Write(b)
		require.NoError(t, file.Close())
		err = checkNewestWAL("db", mem)
		var c *CorruptStoreError
		var fl *Failure
		if err != nil && !errors.As(err, &c) && !errors.As(err, &fl) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		_ = syncedPast(b, 4, 0)
	})
}

// TestS1AWALFailingAtItsRotationSealsWithoutAPanic: the log a flush
// rotates away from fails its last write or sync. Pebble panics when that
// close fails, and the panic ends the process as a fatal error with a Go
// trace; the store seals instead, refuses what follows, and what it
// acknowledged opens again after the crash.
func TestS1AWALFailingAtItsRotationSealsWithoutAPanic(t *testing.T) {
	for _, tc := range walFaults {
		t.Run(tc.name, func(t *testing.T) {
			d := &disk{}
			s, mem, _ := faultyStore(t, d, Options{MarkEvery: -1})
			require.NoError(t, put(s, "m/acknowledged", "\x01{}"))
			d.arm(".log", fmt.Errorf("injected: %w", tc.errno), tc.kinds...)
			go func() { _ = s.Flush() }() // rotates the log; a failing flush may wait for ever
			select {
			case <-s.Health().Sealed():
			case <-time.After(10 * time.Second):
				t.Fatal("the log's failure at its rotation did not seal the store")
			}
			require.Equal(t, tc.cause, s.Health().Failed().Cause)
			require.ErrorAs(t, put(s, "m/after", "\x01{}"), new(*Failure), "refused once sealed")

			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			again, err := Open("db", Options{FS: crashed, MarkEvery: -1})
			require.NoError(t, err, "the store opens after the crash")
			defer again.Close()
			var v struct{}
			require.NoError(t, again.Get([]byte("m/acknowledged"), &v), "what was acknowledged is there")
			require.Equal(t, 1, countRecords(t, again), "and nothing else")
		})
	}
}
