package persistence

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestS12EveryCommitCarriesItsSequenceInOrder: concurrent commits each
// take the next sequence in the order Pebble applies them, so the store
// replays to the last one acknowledged, and a clean close leaves the mark
// there.
func TestS12EveryCommitCarriesItsSequenceInOrder(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 40 {
				require.NoError(t, put(s, fmt.Sprintf("m/g%02d-%02d", g, i), "\x01{}"))
			}
		})
	}
	wg.Wait()
	pb := s.kv.(*pebbleBackend)
	n, err := replayedSeq(pb.db)
	require.NoError(t, err)
	require.Equal(t, uint64(32*40), n, "the sequence the store holds is the last commit's")
	require.Equal(t, n, pb.seq.acked.Load())
	require.NoError(t, s.Close())
	m, err := readMark(pb.fs, dir)
	require.NoError(t, err)
	require.Equal(t, uint64(32*40), m.Seq)
	require.True(t, m.Clean, "written at a clean close, at the last commit")

	s, err = Open(dir, Options{})
	require.NoError(t, err)
	require.NoError(t, put(s, "m/next", "\x01{}"))
	n, _ = replayedSeq(s.kv.(*pebbleBackend).db)
	require.Equal(t, uint64(32*40+1), n, "the sequence goes on after a restart")
	require.NoError(t, s.Close())
}

// TestS12ACleanlyClosedStoreWithItsLogCutIsRefused: a clean close
// writes the mark at the last commit, so its write-ahead log cut by a few
// bytes, to half, or deleted afterwards is found at once: refused at open
// and read-only alike, naming the log and how many acknowledged commits
// are missing (the finding this answers lost 11 of 20 and said "ok").
// Accepted, the store opens as it is with an audit entry.
func TestS12ACleanlyClosedStoreWithItsLogCutIsRefused(t *testing.T) {
	for _, cut := range []string{"a few bytes", "to half", "deleted"} {
		t.Run(cut, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			require.NoError(t, err)
			for i := range 20 {
				require.NoError(t, put(s, fmt.Sprintf("m/x-%02d", i), fmt.Sprintf("\x01{\"pad\":\"%0100d\"}", i)))
			}
			require.NoError(t, s.Close())
			wal := newestWAL(t, dir)
			damageWAL(t, wal, cut)
			for _, open := range []func() (*Store, error){func() (*Store, error) { return Open(dir, Options{}) },
				func() (*Store, error) { return OpenReadOnly(dir, nil) }} {
				_, err := open()
				var c *CorruptStoreError
				require.ErrorAs(t, err, &c)
				require.Positive(t, c.Missing)
				require.Contains(t, err.Error(), filepath.Base(wal))
			}
			s, err = Open(dir, Options{AcceptDataLoss: true})
			require.NoError(t, err)
			require.Less(t, countRecords(t, s), 20)
			require.NoError(t, s.Close())
		})
	}
}

// TestS12AnIntactCleanlyClosedStoreOpensAtOnce: a clean close whose logs
// are found as the mark saw them is opened without the read-only replay
// first, and holds everything.
func TestS12AnIntactCleanlyClosedStoreOpensAtOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, put(s, fmt.Sprintf("m/x-%02d", i), "\x01{}"))
	}
	require.NoError(t, s.Close())
	m, err := readMark(vfs.Default, dir)
	require.NoError(t, err)
	require.True(t, m.Clean)
	require.True(t, walsAsMarked(vfs.Default, dir, m))
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	require.Equal(t, 20, countRecords(t, s))
	require.NoError(t, s.Close())
}

// TestS12AStoreBelowItsMarkIsRefused: a store killed after its mark
// covered every commit, its write-ahead log then cut by a few bytes, to
// half, or deleted, replays to before the mark: refused at open and
// read-only (verify) alike, naming how many acknowledged commits are
// missing, the log that held them and the ways out. With
// --accept-data-loss it opens as it is, with an audit entry of what is
// missing, and its mark follows what it holds from then on.
func TestS12AStoreBelowItsMarkIsRefused(t *testing.T) {
	for _, cut := range []string{"a few bytes", "to half", "deleted"} {
		t.Run(cut, func(t *testing.T) {
			dir := t.TempDir()
			live := t.TempDir()
			s, err := Open(live, Options{MarkEvery: 10 * time.Millisecond})
			require.NoError(t, err)
			for i := range 200 {
				require.NoError(t, put(s, fmt.Sprintf("m/x-%04d", i), fmt.Sprintf("\x01{\"pad\":\"%0200d\"}", i)))
			}
			require.Eventually(t, func() bool {
				m, err := readMark(s.kv.(*pebbleBackend).fs, live)
				return err == nil && m != nil && m.Seq == 200
			}, 5*time.Second, 5*time.Millisecond, "the mark reaches the last acknowledged commit")
			crashImage(t, live, dir)
			require.NoError(t, s.Close())
			wal := newestWAL(t, dir)
			damageWAL(t, wal, cut)

			for _, open := range []func() (*Store, error){func() (*Store, error) { return Open(dir, Options{}) },
				func() (*Store, error) { return OpenReadOnly(dir, nil) }} {
				_, err := open()
				var c *CorruptStoreError
				require.ErrorAs(t, err, &c, "a store below its mark is refused")
				require.Positive(t, c.Missing)
				for _, want := range []string{"acknowledged commit", filepath.Base(wal), "warden restore", "--accept-data-loss", MarkName} {
					require.Contains(t, err.Error(), want)
				}
			}

			s, err = Open(dir, Options{AcceptDataLoss: true})
			require.NoError(t, err, "accepted, the store opens as it is")
			var audits []string
			require.NoError(t, s.ForEach(func(k, v []byte) error {
				if bytes.HasPrefix(k, []byte("z/data-loss/")) {
					audits = append(audits, string(v))
				}
				return nil
			}))
			require.Len(t, audits, 1)
			require.Contains(t, audits[0], "commits_missing")
			require.Contains(t, audits[0], "sequences")
			require.NoError(t, s.Close())
			s, err = Open(dir, Options{})
			require.NoError(t, err, "once accepted, the mark follows what the store holds")
			require.NoError(t, s.Close())
		})
	}
}

// damageWAL cuts a write-ahead log by a few bytes or to half, or deletes
// it.
func damageWAL(t *testing.T, wal, how string) {
	t.Helper()
	st, err := os.Stat(wal)
	require.NoError(t, err)
	switch how {
	case "a few bytes":
		require.NoError(t, os.Truncate(wal, max(0, st.Size()-37)))
	case "to half":
		require.NoError(t, os.Truncate(wal, st.Size()/2))
	case "deleted":
		require.NoError(t, os.Remove(wal))
	}
}

// TestS7AStoreMissingAFileIsRefusedNamingIt: an sstable, the manifest or
// the options file gone: refused at open and read-only alike, as damage
// (exit 65 where warden runs), naming the file.
func TestS7AStoreMissingAFileIsRefusedNamingIt(t *testing.T) {
	for _, missing := range []string{".sst", "MANIFEST-", "OPTIONS-"} {
		t.Run(missing, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			require.NoError(t, err)
			for i := range 100 {
				require.NoError(t, put(s, fmt.Sprintf("m/x-%03d", i), "\x01{}"))
			}
			require.NoError(t, s.Flush()) // records in an sstable too
			require.NoError(t, s.Close())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var gone string
			for _, e := range entries {
				n := e.Name()
				if missing == ".sst" && filepath.Ext(n) == ".sst" || missing != ".sst" && len(n) > len(missing) && n[:len(missing)] == missing {
					gone = n
				}
			}
			require.NotEmpty(t, gone, "the store has a %s file", missing)
			require.NoError(t, os.Remove(filepath.Join(dir, gone)))
			for _, open := range []func() (*Store, error){func() (*Store, error) { return Open(dir, Options{}) },
				func() (*Store, error) { return OpenReadOnly(dir, nil) }} {
				_, err := open()
				var c *CorruptStoreError
				require.ErrorAs(t, err, &c, "a store missing %s is damaged", gone)
				name := gone
				if missing == "OPTIONS-" {
					name = "OPTIONS-"
				}
				require.Contains(t, err.Error(), name)
				require.Contains(t, err.Error(), "warden restore")
			}
		})
	}
}
