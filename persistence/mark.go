package persistence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

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

// visibility holds a read back until every commit it may have seen is
// durable (S5, I15). Pebble shows a batch to readers once it is in the
// memtable, before its WAL sync returns: a read in that window could
// answer with a state that a crash, or a failed sync, then takes back.
//
// Every commit takes a ticket before it enters Pebble and gives it back
// when its sync has returned. A read, once it has read, waits until every
// ticket taken before it finished reading is given back: any batch it saw
// entered Pebble before that, so its ticket is among them. If the store
// seals meanwhile, the read is refused instead.
type visibility struct {
	health   *Health
	mu       sync.Mutex
	cond     sync.Cond
	next     uint64
	inflight []uint64 // tickets not given back, ascending
}

func newVisibility(h *Health) *visibility {
	v := &visibility{health: h}
	v.cond.L = &v.mu
	h.OnSeal(func(*Failure) {
		v.mu.Lock()
		v.cond.Broadcast()
		v.mu.Unlock()
	})
	return v
}

func (v *visibility) begin() uint64 {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	v.next++
	t := v.next
	v.inflight = append(v.inflight, t)
	v.mu.Unlock()
	return t
}

func (v *visibility) end(t uint64) {
	if v == nil {
		return
	}
	v.mu.Lock()
	for i, x := range v.inflight {
		if x == t {
			v.inflight = append(v.inflight[:i], v.inflight[i+1:]...)
			break
		}
	}
	if len(v.inflight) == 0 || v.inflight[0] > t {
		v.cond.Broadcast()
	}
	v.mu.Unlock()
}

// wait returns once every commit begun so far has ended, or the store's
// failure if it sealed first.
func (v *visibility) wait() error {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	upTo := v.next
	for len(v.inflight) > 0 && v.inflight[0] <= upTo {
		if f := v.health.Failed(); f != nil {
			return f
		}
		v.cond.Wait()
	}
	if f := v.health.Failed(); f != nil {
		return f
	}
	return nil
}
