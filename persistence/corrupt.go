package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	crdberrors "github.com/cockroachdb/errors"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Corruption is never silent: a store whose WAL does not replay
// cleanly, or whose files fail their checksums at open, is refused with a
// message naming the file, the offset where known, and what to do.

// CorruptStoreError is a store that cannot be opened without losing
// acknowledged records.
type CorruptStoreError struct {
	Dir string
	// WAL is the damaged write-ahead log's file name, when the damage is
	// there; Offset is where its replay stops.
	WAL    string
	Offset int64
	// File names another file that is missing or damaged (an sstable,
	// the MANIFEST, OPTIONS, the log that held lost commits).
	File string
	// Missing counts acknowledged commits the store no longer holds: its
	// replay ends before its high-water mark.
	Missing uint64
	Err     error
}

func (e *CorruptStoreError) Error() string {
	way := "Run `warden verify --data " + e.Dir + "` to see what is readable, restore from a backup (`warden restore`), or start with --accept-data-loss "
	switch {
	case e.Missing > 0:
		return fmt.Sprintf("the store in %s lost %d acknowledged commit(s): %v; they were in %s. %sto open it as it is (an audit entry records what was dropped)",
			e.Dir, e.Missing, e.Err, e.File, way)
	case e.WAL != "":
		return fmt.Sprintf("the store in %s is damaged: the write-ahead log %s does not replay past offset %d (%v); records acknowledged after that point would be lost. "+
			"%sto truncate the log there (the original is kept beside it and an audit entry records what was dropped)", e.Dir, e.WAL, e.Offset, e.Err, way)
	case e.File != "":
		return fmt.Sprintf("the store in %s is damaged: %s is missing or unreadable (%v). Restore from a backup (`warden restore`); `warden verify --data %s` says what else is wrong",
			e.Dir, e.File, e.Err, e.Dir)
	}
	return fmt.Sprintf("the store in %s is damaged: its files fail their checks (%v); records acknowledged after that point would be lost. %sto truncate the log there (the original is kept beside it and an audit entry records what was dropped)",
		e.Dir, e.Err, way)
}

func (e *CorruptStoreError) Unwrap() error { return e.Err }

// openFailure classifies an error from pebble.Open. A file the store's
// manifest needs that is not there (an sstable, the manifest itself) is
// damage too, named (S7): restarting would only meet it again.
func openFailure(dir string, fs vfs.FS, err error) error {
	if pebble.IsCorruptionError(err) || crdberrors.Is(err, pebble.ErrCorruption) {
		c := &CorruptStoreError{Dir: dir, Err: err, Offset: -1}
		if wal, off, ok := walOfReplay(err); ok {
			c.WAL, c.Offset = wal, off
		}
		return c
	}
	if crdberrors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "file does not exist") {
		return &CorruptStoreError{Dir: dir, File: missingFile(err), Offset: -1, Err: err}
	}
	if c := Classify(err); c != Other {
		return &Failure{Cause: c, Op: "open", Err: err}
	}
	return fmt.Errorf("open store %s: %w", dir, err)
}

// missingFile names the file a "does not exist" from Pebble's open is
// about: an sstable ("file 000005 (type sstable)") or a manifest.
var (
	missingTable    = regexp.MustCompile(`file (\d{6,}) \(type sstable\)`)
	missingManifest = regexp.MustCompile(`MANIFEST-\d{6,}`)
)

func missingFile(err error) string {
	msg := err.Error()
	if m := missingTable.FindStringSubmatch(msg); m != nil {
		return m[1] + ".sst"
	}
	if m := missingManifest.FindString(msg); m != "" {
		return m
	}
	return "a file of the store"
}

// checkStoreFiles refuses a store whose manifest or options file is gone:
// Pebble opens without an OPTIONS file, and without its manifest it
// would see no store at all, but either means files were lost.
func checkStoreFiles(dir string, fs vfs.FS) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // a new store
	}
	var manifest, options bool
	var named string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker.manifest."):
			named = n[strings.LastIndexByte(n, '.')+1:]
		case strings.HasPrefix(n, "OPTIONS-"):
			options = true
		}
	}
	if named == "" {
		return nil // no store here yet
	}
	manifest = slices.Contains(names, named)
	switch {
	case !manifest:
		return &CorruptStoreError{Dir: dir, File: named, Offset: -1, Err: errors.New("the manifest the store's marker names is not there")}
	case !options:
		return &CorruptStoreError{Dir: dir, File: "OPTIONS-*", Offset: -1, Err: errors.New("the store's options file is not there")}
	}
	return nil
}

// walOfReplay finds the log and offset in Pebble's "replaying wal N,
// offset O" detail.
func walOfReplay(err error) (string, int64, bool) {
	for _, d := range crdberrors.GetAllDetails(err) {
		var num uint64
		var off int64
		if n, _ := fmt.Sscanf(d, "replaying wal %d, offset %d", &num, &off); n >= 1 {
			return fmt.Sprintf("%06d.log", num), off, true
		}
	}
	return "", -1, false
}

// checkNewestWAL looks for what Pebble's replay cannot see: damage in the
// last 32 KiB block of the newest log. Pebble tells damage from a torn
// tail by a later chunk that says it was synced past the bad one, but it
// looks only in later blocks; a flip in the last block would end the
// replay there, silently. This reads the log the way replay does and,
// where it ends uncleanly, searches every byte after for such a chunk.
func checkNewestWAL(dir string, fs vfs.FS) error {
	names, err := fs.List(dir)
	if err != nil {
		return nil // a missing directory is a new store
	}
	var logs []uint64
	for _, n := range names {
		if num, ok := strings.CutSuffix(n, ".log"); ok {
			if v, err := strconv.ParseUint(num, 10, 64); err == nil {
				logs = append(logs, v)
			}
		}
	}
	if len(logs) == 0 {
		return nil
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i] < logs[j] })
	num := logs[len(logs)-1]
	name := fmt.Sprintf("%06d.log", num)
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return &Failure{Cause: Classify(err), Op: "read " + name, Err: err}
	}
	r := newWALReader(record.NewReader, bytes.NewReader(data), num)
	for {
		at := r.Offset()
		rec, err := r.Next()
		if err == nil {
			_, err = io.Copy(io.Discard, rec)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, record.ErrUnexpectedEOF):
			if !syncedPast(data, uint32(num), at) {
				return nil // a torn tail: nothing after it was acknowledged
			}
			err = record.ErrInvalidChunk
		}
		return &CorruptStoreError{Dir: dir, WAL: name, Offset: at, Err: fmt.Errorf("replaying %s: %w", name, err)}
	}
}

// newWALReader calls record.NewReader with a log number of Pebble's own
// (internal) number type, which only inference can name.
func newWALReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}

// walSyncHeader is a chunk header with a sync offset: CRC (4), size (2),
// type (1), log number (4), synced offset (8).
const walSyncHeader = 19

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// syncedPast reports whether a valid chunk of this log after from says the
// log was synced beyond from: then the records at from were acknowledged
// and their loss is damage, not a torn tail.
func syncedPast(data []byte, logNum uint32, from int64) bool {
	for i := int(from) + 1; i+walSyncHeader <= len(data); i++ {
		typ := data[i+6]
		if typ < 9 || typ > 12 { // the WAL-sync chunk encodings
			continue
		}
		size := int(binary.LittleEndian.Uint16(data[i+4 : i+6]))
		end := i + walSyncHeader + size
		if end > len(data) || binary.LittleEndian.Uint32(data[i+7:i+11]) != logNum {
			continue
		}
		c := crc32.Update(0, castagnoli, data[i+6:end])
		if binary.LittleEndian.Uint32(data[i:i+4]) != (c>>15|c<<17)+0xa282ead8 {
			continue
		}
		if int64(binary.LittleEndian.Uint64(data[i+11:i+19])) > from {
			return true
		}
	}
	return false
}

// dataLoss is what an --accept-data-loss repair dropped.
type dataLoss struct {
	At           time.Time `json:"at"`
	WAL          string    `json:"wal"`
	Offset       int64     `json:"offset"`
	BytesDropped int64     `json:"bytes_dropped,omitempty"`
	KeptAs       string    `json:"kept_as,omitempty"`
	Reason       string    `json:"reason"`
	// CommitsMissing and Sequences: the acknowledged commits a store
	// opened below its high-water mark no longer holds.
	CommitsMissing uint64 `json:"commits_missing,omitempty"`
	Sequences      string `json:"sequences,omitempty"`
}

// truncateWAL keeps the damaged log beside the store and cuts it at the
// damage, so that it replays cleanly up to there (S7's explicit data loss).
func truncateWAL(fs vfs.FS, c *CorruptStoreError) (dataLoss, error) {
	if fs == nil {
		fs = vfs.Default
	}
	path := fs.PathJoin(c.Dir, c.WAL)
	st, err := fs.Stat(path)
	if err != nil {
		return dataLoss{}, err
	}
	if c.Offset < 0 || c.Offset > st.Size() {
		return dataLoss{}, fmt.Errorf("no offset to truncate %s at", c.WAL)
	}
	kept := c.WAL + ".damaged"
	if err := vfs.CopyAcrossFS(fs, path, fs, fs.PathJoin(c.Dir, kept)); err != nil {
		return dataLoss{}, fmt.Errorf("keep %s: %w", c.WAL, err)
	}
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return dataLoss{}, err
	}
	defer f.Close()
	if t, ok := f.(interface{ Truncate(int64) error }); ok {
		err = t.Truncate(c.Offset)
	} else {
		err = os.Truncate(filepath.Clean(path), c.Offset)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return dataLoss{}, fmt.Errorf("truncate %s: %w", c.WAL, err)
	}
	return dataLoss{At: time.Now().UTC(), WAL: c.WAL, Offset: c.Offset, BytesDropped: st.Size() - c.Offset,
		KeptAs: kept, Reason: fmt.Sprint(c.Err)}, nil
}

// recordDataLoss writes the repair's audit entry into the store it
// repaired, and logs it.
func recordDataLoss(kv *pebbleBackend, l dataLoss, log *slog.Logger) error {
	b, _ := json.Marshal(l)
	w := kv.NewWrites()
	defer w.Close()
	w.Set(dataLossKey(l.At), append([]byte{codecV1}, b...))
	if err := w.Commit(Fence{}); err != nil {
		return fmt.Errorf("record the data loss: %w", err)
	}
	if l.CommitsMissing > 0 {
		log.Error("data loss accepted: acknowledged commits are missing and the store opens as it is", "commits_missing", l.CommitsMissing,
			"sequences", l.Sequences, "lost_in", l.WAL)
		return nil
	}
	log.Error("data loss accepted: the damaged write-ahead log was truncated", "wal", l.WAL, "offset", l.Offset,
		"bytes_dropped", l.BytesDropped, "kept_as", l.KeptAs)
	return nil
}
