package persistence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// The key layout (see the package doc), spelled here and nowhere else: one
// prefix a record family, so a family is one contiguous range. The store
// knows the families' names, not their records: each kind's codec lives
// with the kind (actors).

// Family prefixes.
const (
	MarqueePrefix       = "m/"
	HistoryFamily       = "h/"
	DedupFamily         = "d/"
	DeliveriesFamily    = "r/"
	PoolPrefix          = "p/"
	AdmissionFamily     = "a/"
	EnvPrefix           = "e/"
	BranchFamily        = "b/"
	WakePrefix          = "w/"
	GuardFamily         = "g/"
	dataLossPrefix      = "z/data-loss/"
	generationKeyDigits = 16
)

// MarqueeKey is a marquee's snapshot.
func MarqueeKey(id string) []byte { return []byte(MarqueePrefix + id) }

// HistoryPrefix is a marquee's history; HistoryKey its seq-th entry.
func HistoryPrefix(id string) []byte { return []byte(HistoryFamily + id + "/") }

func HistoryKey(id string, seq uint64) []byte {
	b := make([]byte, 0, len(HistoryFamily)+len(id)+1+16)
	b = append(append(append(b, HistoryFamily...), id...), '/')
	return appendHex16(b, seq) // by hand: fmt was two allocations of every step
}

// appendHex16 appends n as 16 lower-case hex digits ("%016x").
func appendHex16(b []byte, n uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[n>>uint(shift)&0xF])
	}
	return b
}

// DedupPrefix is an entity's delivery records; DedupKey one of them (T5).
func DedupPrefix(entity string) []byte { return []byte(DedupFamily + entity + "/") }

func DedupKey(entity, deliveryID string) []byte {
	return []byte(DedupFamily + entity + "/" + deliveryID)
}

// PoolKey is a pool's metadata.
func PoolKey(name string) []byte { return []byte(PoolPrefix + name) }

// AdmissionPrefix is a pool's job records; AdmissionKey one of them.
func AdmissionPrefix(pool string) []byte { return []byte(AdmissionFamily + pool + "/") }

func AdmissionKey(pool, job string) []byte { return []byte(AdmissionFamily + pool + "/" + job) }

// EnvKey is an environment's record.
func EnvKey(id string) []byte { return []byte(EnvPrefix + id) }

// LegacyBranchKey held a branch's last route generation before each
// generation had a key of its own (read, never written).
func LegacyBranchKey(branch string) []byte { return []byte(BranchFamily + branch) }

// BranchGenerationPrefix is a branch's route generations; each given out
// has a key, so that two creates of one branch committing in either order
// leave the newest readable (the last key).
func BranchGenerationPrefix(branch string) []byte { return []byte(BranchFamily + branch + "/") }

func BranchGenerationKey(branch string, g uint64) []byte {
	return fmt.Appendf(nil, "%s%s/%0*x", BranchFamily, branch, generationKeyDigits, g)
}

// ParseBranchGeneration reads the generation a BranchGenerationKey names.
func ParseBranchGeneration(prefix, key []byte) (uint64, bool) {
	if !bytes.HasPrefix(key, prefix) {
		return 0, false
	}
	rest := key[len(prefix):]
	if len(rest) != generationKeyDigits {
		return 0, false
	}
	g, err := strconv.ParseUint(string(rest), 16, 64)
	return g, err == nil
}

// GuardKey is a cluster entity's guard: its mod revision is the
// revision of the entity's last commit, which the next commit compares.
// Its value names the commit that wrote it, so that a read-back can tell
// that commit from another. A single node writes none.
func GuardKey(kind, id string) string { return GuardFamily + kind + "/" + id }

// Entity kinds in the wake index.
const (
	WakeMarquee     = "m"
	WakeEnvironment = "e"
)

// WakeKey is an entity's wake-index entry at a time.
func WakeKey(at time.Time, kind, id string) []byte {
	return fmt.Appendf(nil, "%s%016x/%s/%s", WakePrefix, uint64(at.UnixNano()), kind, id)
}

// dataLossKey is the audit entry of a repair that dropped data.
func dataLossKey(at time.Time) []byte {
	return fmt.Appendf(nil, "%s%016x", dataLossPrefix, uint64(at.UnixNano()))
}

// Encoding: one version byte, then JSON. The version says how the rest is
// read; a value that does not decode is a CorruptError naming its key.

// codecV1 is the only encoding so far: a version byte then JSON.
const codecV1 byte = 1

// Encode is v's stored form: the version byte, then JSON.
func Encode(v any) []byte {
	var buf bytes.Buffer
	encodeRecord(&buf, v)
	return buf.Bytes()
}

// JSONAppender is a record that encodes itself, byte for byte as
// encoding/json would (internal/jsonappend): the records every step
// writes, whose reflection was most of a commit's encoding.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// encodeRecord writes v's stored form to buf, its JSON as json.Marshal
// writes it: by hand for a JSONAppender (the records of every step), else
// by encoding/json. Records are the project's own types, which always
// encode; one that does not is a bug.
func encodeRecord(buf *bytes.Buffer, v any) {
	buf.WriteByte(codecV1)
	var err error
	if a, ok := v.(JSONAppender); ok {
		var val []byte
		val, err = a.AppendJSON(buf.AvailableBuffer())
		buf.Write(val) // onto itself where it fit the buffer's room
	} else if err = json.NewEncoder(buf).Encode(v); err == nil {
		buf.Truncate(buf.Len() - 1) // the Encoder's newline: json.Marshal's bytes
	}
	if err != nil {
		panic(fmt.Sprintf("persistence: encode %T: %v", v, err)) // our own types always encode
	}
}

// Decode reads a stored value into v; a value that does not decode is a
// *CorruptError naming its key (A8).
//
// It reads with the JSON v2 engine under encoding/json's semantics
// (decodeOptions): a record means what it meant when it was stored, at
// about a third of the CPU and a sixth of the allocations (activation,
// verify and start-up decode a record for every marquee they touch).
func Decode(key, val []byte, v any) error {
	if len(val) == 0 {
		return &CorruptError{Malformed{Key: string(key), Reason: "empty value"}}
	}
	if val[0] != codecV1 {
		return &CorruptError{Malformed{Key: string(key), Reason: fmt.Sprintf("unknown encoding version %d", val[0])}}
	}
	if err := jsonv2.Unmarshal(val[1:], v, decodeOptions); err != nil {
		return &CorruptError{Malformed{Key: string(key), Reason: "does not decode: " + err.Error()}}
	}
	return nil
}

// decodeOptions are encoding/json's reading rules (names matched without
// case, a repeated name's last value kept, invalid UTF-8 replaced), so
// that every record stored so far reads exactly as before, with unknown
// fields refused as Decoder.DisallowUnknownFields refused them. One
// difference, on purpose: data after the record's value is refused (the
// Decoder stopped at the value's end), since the encoder never writes any
// and a value with a tail has been damaged.
// TestDecodeReadsAsEncodingJSONRead and FuzzDecodeAgreesWithEncodingJSON
// hold it to the old reader.
var decodeOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true))

// The wake index: entities with a deadline or unsettled effects, by time.

// Wake is one entry of the wake index.
type Wake struct {
	At     time.Time
	Letter string // KindMarquee or KindEnvironment
	ID     string
}

// Wakes returns every wake-index entry due at or before until, earliest
// first. Only entities with work due are listed, so start-up cost follows the
// work, not the number of stored marquees.
func (s *Store) Wakes(until time.Time) ([]Wake, error) {
	var out []Wake
	end := WakeKey(until, WakeMarquee, "\xff")
	err := s.Scan([]byte(WakePrefix), nil, func(k, _ []byte) (bool, error) {
		if bytes.Compare(k, end) > 0 {
			return false, nil
		}
		var nanos uint64
		parts := strings.SplitN(string(k), "/", 4)
		if len(parts) != 4 || (parts[2] != WakeMarquee && parts[2] != WakeEnvironment) {
			return true, nil // not ours; never written by this version
		}
		if _, err := fmt.Sscanf(parts[1], "%016x", &nanos); err != nil {
			return true, nil
		}
		out = append(out, Wake{At: time.Unix(0, int64(nanos)).UTC(), Letter: parts[2], ID: parts[3]})
		return true, nil
	})
	return out, err
}

// MoveWake moves an entity's wake-index entry from old to at (either may
// be zero: none), in the same batch as the record that owns it (M23).
func (b *Batch) MoveWake(kind, id string, old, at time.Time) { moveWake(b, kind, id, old, at) }

// An entry that stays where it is is not written again: only MoveWake
// writes the index, so it is there already.
func moveWake(w Writer, kind, id string, old, at time.Time) {
	if old.Equal(at) {
		return
	}
	if !old.IsZero() {
		w.Delete(WakeKey(old, kind, id))
	}
	if !at.IsZero() {
		w.Set(WakeKey(at, kind, id), nil)
	}
}
