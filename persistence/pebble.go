package persistence

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// pebbleBackend is the single-node Backend.
type pebbleBackend struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions
	health    *Health
	readOnly  bool
	closeOnce sync.Once
	closeErr  error
	// The high-water mark (below): the commits' sequence, the files
	// it is kept in, and its writer.
	seq                sequencer
	fs                 vfs.FS
	dir                string
	log                *slog.Logger
	markStop, markDone chan struct{}
	// onFatal is Options.OnFatal: nil in production.
	onFatal func()
}

// CacheSize is Pebble's block cache: snapshots of active marquees, recent
// history and the filters stay in memory; 64 MiB is small for a 24 GiB host
// and large for the working set of thousands of active marquees.
const CacheSize = 64 << 20

// FormatVersion is the on-disk format every store is opened at, and an
// older one ratcheted to (S6): the newest the pinned Pebble supports. It
// is at least FormatWALSyncChunks, whose WAL records carry their sync
// offsets, so that replay tells a torn tail (tolerated: nothing after it
// was ever acknowledged) from damage in the middle (refused, S7).
const FormatVersion = pebble.FormatNewest

// The build fails (a negative constant) if the pinned Pebble's newest
// format were older than WAL sync chunks.
const _ = uint(FormatVersion - pebble.FormatWALSyncChunks)

// openPebble opens the database in dir, read-write or read-only. A Fatalf
// from Pebble while it opens (a replay that cannot write its manifest)
// seals h and is returned instead of waiting for an Open that will never
// return.
func openPebble(dir string, o Options, h *Health, readOnly bool) (*pebbleBackend, error) {
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	before, _ := pebble.Peek(dir, fs)
	if err := checkStoreFiles(dir, fs); err != nil {
		return nil, err
	}
	if err := checkNewestWAL(dir, fs); err != nil {
		return nil, err
	}
	plog := newPebbleLogger(o.Logger, h, o.OnFatal)
	db, err := openWithin(dir, pebbleOptions(fs, o, h, plog, readOnly), h)
	if errors.Is(err, errSealedOpening) {
		return nil, h.Failed()
	}
	if err != nil {
		return nil, openFailure(dir, fs, err)
	}
	if before != nil && before.Exists && before.FormatMajorVersion < db.FormatMajorVersion() {
		logger(o.Logger).Info("store format ratcheted", "data", dir,
			"from", before.FormatMajorVersion.String(), "to", db.FormatMajorVersion().String())
	}
	if !readOnly && (before == nil || !before.Exists || before.FormatMajorVersion < pebble.FormatWALSyncChunks) {
		// Pebble wrote the log it opened before it ratcheted the format,
		// so that log has no sync offsets; a flush starts a new one that
		// has.
		if err := db.Flush(); err != nil {
			_ = db.Close()
			return nil, openFailure(dir, fs, err)
		}
	}
	wo := pebble.Sync
	if o.NoSync {
		wo = pebble.NoSync
	}
	p := &pebbleBackend{db: db, writeOpts: wo, health: h, readOnly: readOnly, fs: fs, dir: dir, log: o.Logger, onFatal: o.OnFatal}
	replayed, err := replayedSeq(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	p.seq.next = replayed + 1
	p.seq.acked.Store(replayed)
	return p, nil
}

// pebbleOptions are the store's Pebble options.
func pebbleOptions(fs vfs.FS, o Options, h *Health, plog pebbleLogger, readOnly bool) *pebble.Options {
	po := &pebble.Options{
		FS:                 allOrNothingWAL{FS: fs, health: h},
		MaxOpenFiles:       o.MaxOpenFiles,
		FormatMajorVersion: FormatVersion,
		ReadOnly:           readOnly,
		Logger:             plog,
		EventListener:      eventListener(o.Logger, h),
		// Every callback with a Webhook-Id looks its delivery up, and almost
		// every lookup misses: bloom filters answer a miss from memory
		// instead of reading a block of every level.
		CacheSize: CacheSize,
		// Every key a commit writes is inserted into the memtable's skiplist,
		// whose cost grows with the memtable: each level of the search is a
		// cache miss. At 16 MiB the durable path spent less than at 64, 32
		// or 8 (smaller ones flush and compact more often): BENCHMARKS.md,
		// "Reading the figures".
		MemTableSize: 16 << 20,
	}
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return po
}

// errSealedOpening: the store was sealed while Pebble opened it.
var errSealedOpening = errors.New("sealed while opening")

// openWithin opens Pebble unless h is sealed first: a Fatalf while it
// opens seals h, and that Open never returns.
func openWithin(dir string, po *pebble.Options, h *Health) (*pebble.DB, error) {
	type opened struct {
		db  *pebble.DB
		err error
	}
	done := make(chan opened, 1)
	go func() {
		db, err := pebble.Open(dir, po)
		done <- opened{db, err}
	}()
	select {
	case r := <-done:
		return r.db, r.err
	case <-h.Sealed():
		return nil, errSealedOpening
	}
}

// openChecked is openPebble held to the store's high-water mark:
// a store that replays to before it is refused, unless accept; then the
// loss is recorded. A writable store keeps its mark from then on.
func openChecked(dir string, o Options, h *Health, readOnly, accept bool) (*pebbleBackend, error) {
	if !readOnly && !accept {
		if err := precheckMark(dir, o, h); err != nil {
			return nil, err
		}
	}
	p, err := openPebble(dir, o, h, readOnly)
	if err != nil {
		return nil, err
	}
	replayed := p.seq.acked.Load()
	m, err := checkMark(p.fs, dir, replayed)
	var lost *CorruptStoreError
	switch {
	case err != nil && accept && !readOnly && errors.As(err, &lost) && lost.Missing > 0:
		loss := dataLoss{At: time.Now().UTC(), WAL: lost.File, Offset: -1, Reason: err.Error(), CommitsMissing: lost.Missing,
			Sequences: fmt.Sprintf("%d-%d", replayed+1, m.Seq)}
		if rerr := recordDataLoss(p, loss, logger(o.Logger)); rerr != nil {
			_ = p.db.Close()
			return nil, rerr
		}
		m = nil // the mark is rewritten from what the store holds now
	case err != nil:
		_ = p.db.Close()
		return nil, err
	}
	if m != nil {
		p.seq.written.Store(m.Seq)
	}
	if !readOnly {
		if m == nil {
			p.writeMarkIfBehind(false)
		}
		if o.MarkEvery >= 0 {
			p.startMarkWriter(cmp.Or(o.MarkEvery, markEvery))
		}
	}
	return p, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// precheckMark holds a store to its mark before it is opened for
// writing: Pebble's read-write open writes (a new log, the replayed
// records), and a store that is to be refused is left exactly as it was.
// A store closed cleanly whose logs are as the mark saw them cannot have
// lost anything; only the others are replayed read-only first.
func precheckMark(dir string, o Options, h *Health) error {
	fs := cmp.Or[vfs.FS](o.FS, vfs.Default)
	m, err := readMark(fs, dir)
	if err != nil || m == nil || m.Clean && walsAsMarked(fs, dir, m) {
		return err
	}
	ro, err := openPebble(dir, o, h, true)
	if err != nil {
		return err
	}
	replayed := ro.seq.acked.Load()
	_ = ro.db.Close()
	_, err = checkMark(fs, dir, replayed)
	return err
}

// Close closes the database, unless the store is sealed: a sealed Pebble
// may hold its commit pipeline's locks in a goroutine that will never
// return, and a Close would wait for it forever (S3).
//
// A clean close writes the mark exactly at the last commit, so any
// loss of the write-ahead log after it is found. Decided: the memtables
// are not flushed first. Pebble's flush rotates the log, and a rotation
// whose old log cannot be closed (a failing disk) panics through Pebble's
// locks into an unrecoverable fatal error: a close must not be able to
// crash the process.
func (p *pebbleBackend) Close() error {
	if f := p.health.Failed(); f != nil {
		return fmt.Errorf("not closed: %w", f)
	}
	p.closeOnce.Do(func() {
		if p.markStop != nil {
			close(p.markStop)
			<-p.markDone
		}
		p.closeErr = p.db.Close()
		if !p.readOnly && p.closeErr == nil {
			p.writeMarkIfBehind(true)
		}
	})
	return p.closeErr
}

func (p *pebbleBackend) Get(key []byte, f func([]byte) error) error { return get(p.db, key, f) }

func (p *pebbleBackend) Scan(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	return scan(p.db, lower, upper, false, f)
}

func (p *pebbleBackend) ScanReverse(lower, upper []byte, f func(k, v []byte) (bool, error)) error {
	return scan(p.db, lower, upper, true, f)
}

// get and scan read a Pebble database or a snapshot of it (View).
func get(r pebble.Reader, key []byte, f func([]byte) error) error {
	val, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return readFailure(key, err)
	}
	defer closer.Close()
	return f(val)
}

func scan(r pebble.Reader, lower, upper []byte, reverse bool, f func(k, v []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return readFailure(lower, err)
	}
	return iterate(it, lower, reverse, f)
}

// iterate walks an iterator to its end (its start, reverse), or until f
// stops it, and closes it.
func iterate(it *pebble.Iterator, lower []byte, reverse bool, f func(k, v []byte) (bool, error)) error {
	first, next := it.First, it.Next
	if reverse {
		first, next = it.Last, it.Prev
	}
	for ok := first(); ok; ok = next() {
		more, err := f(it.Key(), it.Value())
		if err != nil {
			it.Close()
			return err
		}
		if !more {
			break
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return readFailure(lower, err)
	}
	return it.Close()
}

// readFailure names a read that Pebble refused: a checksum that failed is
// corruption of that key's sstable, anything else an I/O problem.
func readFailure(key []byte, err error) error {
	op := fmt.Sprintf("read %q", key)
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		op += " from " + info.Path
	}
	return &Failure{Cause: Classify(err), Op: op, Err: err}
}

func (p *pebbleBackend) NewWrites() Writes { return &pebbleWrites{p: p, b: p.db.NewBatch()} }

type pebbleWrites struct {
	p   *pebbleBackend
	b   *pebble.Batch
	n   int
	seq [24]byte // room for the commit's sequence value
}

func (w *pebbleWrites) Set(k, v []byte) { _ = w.b.Set(k, v, nil); w.n++ }

func (w *pebbleWrites) Delete(k []byte) { _ = w.b.Delete(k, nil); w.n++ }

func (w *pebbleWrites) DeleteRange(lower, upper []byte) {
	_ = w.b.DeleteRange(lower, upper, nil)
	w.n++
}

func (w *pebbleWrites) Len() int { return w.n }

// Commit refuses a fence: one Pebble database has one writer, the process
// holding its directory lock, and a fence it cannot check would be a
// promise it does not keep. A failed WAL write or sync seals the store
// and is refused (failedSync).
//
// Every commit carries its sequence (v/seq, S12): the number is taken and
// the batch applied under the sequencer's lock, in Pebble's order, and
// the sync is waited for outside it, so concurrent commits still share
// one WAL sync.
func (w *pebbleWrites) Commit(f Fence) error {
	if !f.IsZero() {
		return errors.New("the Pebble backend is single-node and cannot check a cluster fence")
	}
	if w.p.readOnly {
		return w.p.health.writeRefusal()
	}
	s := &w.p.seq
	s.mu.Lock()
	n := s.next
	_ = w.b.Set(seqKeyBytes, appendSeq(w.seq[:0], n), nil) // Set copies both
	var err error
	if w.p.writeOpts.Sync {
		err = w.p.db.ApplyNoSyncWait(w.b, w.p.writeOpts)
	} else {
		err = w.b.Commit(w.p.writeOpts)
	}
	if err == nil {
		s.next++
	}
	s.mu.Unlock()
	if err == nil && w.p.writeOpts.Sync {
		if err = w.b.SyncWait(); err != nil {
			return w.p.failedSync(w.p.health.sealFailure(fmt.Errorf("pebble: fatal commit error: %w", err), walFailureOp))
		}
		if f := w.p.health.Failed(); f != nil {
			// A log failed under this batch and took nothing more
			// (allOrNothingWAL): it is not durable, whatever Pebble says.
			return w.p.failedSync(f)
		}
	}
	if err != nil {
		return err
	}
	s.ack(n)
	return nil
}

// failedSync is a commit whose sync failed, the store sealed: refused,
// not waited on for ever as Pebble's own Fatalf is. Unlike Pebble's
// goroutine there, this one holds nothing of Pebble's (the sequencer's
// lock is released), the batch it applied to the memtable is never read
// (a sealed store serves no read, S5), and it may be the caller's own
// (an ask that runs its actor's turn), which must be answered. The
// simulator's OnFatal crashes its process here, as at Pebble's Fatalf.
func (p *pebbleBackend) failedSync(f *Failure) error {
	if p.onFatal != nil {
		p.onFatal()
	}
	return f
}

func (w *pebbleWrites) Close() { _ = w.b.Close() }

// The high-water mark. A cleanly closed Pebble store may be opened
// without its write-ahead log, and a WAL that was cut or deleted replays
// to an earlier state without a word: Pebble cannot know what it never
// saw. So every commit carries a sequence (v/seq, in the same batch), and
// the last acknowledged one is kept outside the WAL, in a small synced
// file beside the store (MarkName), written at most markEvery apart while
// the store serves and at a clean close, exact then. A store whose
// replayed sequence is below the mark lost commits that were
// acknowledged, and is refused (65) saying how many, unless the loss is
// accepted (an audit entry).
//
// What the interval leaves undetectable: after a crash (not a clean
// close), the commits acknowledged in the last markEvery before it, if
// the WAL that held them is then cut or deleted too. A crash alone loses
// nothing synced; a mark written with every commit would double the
// fsyncs of the durable path to close a window that needs a crash and a
// damaged log together.

const (
	// seqKey holds the sequence of the commit that wrote it.
	seqKey = FormatFamily + "seq"
	// MarkName is the mark's file in the store's directory.
	MarkName = "warden.mark"
	// markEvery bounds how stale the mark is while the store serves.
	markEvery = time.Second
)

// mark is what MarkName holds.
type mark struct {
	// Seq is the last acknowledged commit's sequence.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// Clean: written at a clean close, after the last commit: Seq is
	// exact.
	Clean bool `json:"clean"`
	// WALs are the write-ahead logs the store had when the mark was
	// written, and their sizes: at a clean close, logs found as they were
	// then cannot have lost anything.
	WALs []walFile `json:"wals,omitempty"`
}

type walFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// maxMarkFile bounds what is read of a mark file.
const maxMarkFile = 64 << 10

// sequencer gives commits their sequence in the order Pebble applies
// them: the number is taken and the batch applied (not synced) under one
// lock, so the sequence a replay ends at is the last commit's; the syncs
// still share the WAL's group commit.
type sequencer struct {
	mu      sync.Mutex
	next    uint64
	acked   atomic.Uint64
	written atomic.Uint64 // the Seq of the last mark written
}

func (s *sequencer) ack(n uint64) {
	for {
		cur := s.acked.Load()
		if n <= cur || s.acked.CompareAndSwap(cur, n) {
			return
		}
	}
}

// Internal reports a key the store keeps for itself (the commit
// sequence), not a record: copies and digests of the records leave it
// out, and each store keeps its own.
func Internal(k []byte) bool { return string(k) == seqKey }

// appendSeq appends the sequence's value to b: a commit appends it to its
// own room rather than allocating it.
func appendSeq(b []byte, n uint64) []byte { return strconv.AppendUint(append(b, codecV1), n, 10) }

// seqKeyBytes is seqKey as commits write it and opens read it, made once.
var seqKeyBytes = []byte(seqKey)

// replayedSeq is the sequence of the last commit the store holds (0: none
// carried one).
func replayedSeq(db pebble.Reader) (uint64, error) {
	v, closer, err := db.Get(seqKeyBytes)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, readFailure(seqKeyBytes, err)
	}
	defer closer.Close()
	if len(v) < 2 || v[0] != codecV1 {
		return 0, &CorruptError{Malformed{Key: seqKey, Reason: "not a sequence"}}
	}
	n, err := strconv.ParseUint(string(v[1:]), 10, 64)
	if err != nil {
		return 0, &CorruptError{Malformed{Key: seqKey, Reason: "not a sequence"}}
	}
	return n, nil
}

// readMark reads dir's mark; a store without one (new, restored, or
// older than the mark) has none to be held to.
func readMark(fs vfs.FS, dir string) (*mark, error) {
	f, err := fs.Open(fs.PathJoin(dir, MarkName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &Failure{Cause: Classify(err), Op: "read " + MarkName, Err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarkFile+1))
	if err != nil {
		return nil, &Failure{Cause: Classify(err), Op: "read " + MarkName, Err: err}
	}
	var m mark
	if len(b) > maxMarkFile || json.Unmarshal(b, &m) != nil {
		return nil, &CorruptStoreError{Dir: dir, File: MarkName, Offset: -1, Err: errors.New("the high-water mark does not decode")}
	}
	return &m, nil
}

// writeMark replaces dir's mark: a new file synced, renamed over the old
// one, the directory synced, so a crash leaves the old mark or the new.
func writeMark(fs vfs.FS, dir string, m mark) error {
	b, _ := json.Marshal(m)
	tmp := fs.PathJoin(dir, MarkName+".tmp")
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, fs.PathJoin(dir, MarkName)); err != nil {
		return err
	}
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// walFiles lists the store's write-ahead logs, in order, with their sizes.
func walFiles(fs vfs.FS, dir string) []walFile {
	names, _ := fs.List(dir)
	var out []walFile
	for _, n := range names {
		if isWAL(n) {
			f := walFile{Name: n, Size: -1}
			if st, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
				f.Size = st.Size()
			}
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b walFile) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// walsAsMarked reports whether every log the mark saw is there at the
// size it had: after a clean close, then, nothing the mark covers can be
// missing, and the store need not be replayed twice to be sure.
func walsAsMarked(fs vfs.FS, dir string, m *mark) bool {
	now := walFiles(fs, dir)
	return slices.Equal(now, m.WALs)
}

// checkMark refuses a store that replays to before its mark: commits that
// were acknowledged are missing (S12).
func checkMark(fs vfs.FS, dir string, replayed uint64) (*mark, error) {
	m, err := readMark(fs, dir)
	if err != nil || m == nil || m.Seq <= replayed {
		return m, err
	}
	return m, &CorruptStoreError{Dir: dir, File: lostIn(fs, dir, m), Offset: -1, Missing: m.Seq - replayed,
		Err: fmt.Errorf("the store replays to commit %d; %s (%s) says commit %d was acknowledged", replayed, MarkName, m.At.Format(time.RFC3339), m.Seq)}
}

// lostIn names where the missing commits were: logs the mark saw that are
// gone or shorter now, else the newest log left (cut, or one before it
// deleted; Pebble recycles and deletes only logs it has flushed).
func lostIn(fs vfs.FS, dir string, m *mark) string {
	now := walFiles(fs, dir)
	var named []string
	for _, w := range m.WALs {
		i := slices.IndexFunc(now, func(f walFile) bool { return f.Name == w.Name })
		switch {
		case i < 0 && (len(now) == 0 || w.Name > now[len(now)-1].Name):
			named = append(named, w.Name+" (deleted)")
		case i >= 0 && now[i].Size < w.Size:
			named = append(named, fmt.Sprintf("%s (cut from %d to %d bytes)", w.Name, w.Size, now[i].Size))
		}
	}
	switch {
	case len(named) > 0:
		return strings.Join(named, ", ")
	case len(now) == 0:
		return "the write-ahead log (deleted)"
	}
	return now[len(now)-1].Name + ", the newest write-ahead log (cut, or a log before it deleted)"
}

// markWriter keeps the mark at most markEvery behind the last
// acknowledged commit while the store serves; stop ends it.
func (p *pebbleBackend) startMarkWriter(every time.Duration) {
	p.markStop, p.markDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.markDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.markStop:
				return
			case <-t.C:
				p.writeMarkIfBehind(false)
			}
		}
	}()
}

// writeMarkIfBehind writes the mark when a commit was acknowledged since
// the last one (or, at a clean close, always). A failed write leaves the
// old mark, which is only staler; the next tick tries again.
func (p *pebbleBackend) writeMarkIfBehind(clean bool) {
	n := p.seq.acked.Load()
	if !clean && n <= p.seq.written.Load() {
		return
	}
	if err := writeMark(p.fs, p.dir, mark{Seq: n, At: time.Now().UTC(), Clean: clean, WALs: walFiles(p.fs, p.dir)}); err != nil {
		logger(p.log).Warn("the store's high-water mark was not written; the next try is in a second", "err", err)
		return
	}
	p.seq.written.Store(n)
}
