package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/internal/fieldcheck"
	"github.com/wardenhq/warden/persistence"
)

// awkward is a string every escape of encoding/json's meets: quotes,
// backslashes, control bytes, HTML's <, > and &, invalid UTF-8, U+2028
// and U+2029, and characters written as themselves.
const awkward = "a\"b\\c\x00\x1f\b\f\n\r\t<>&\xff\xc3(\u2028\u2029é✓\U0001F600"

// TestRecordsEncodeAsEncodingJSONDoes: a marquee's record and its history
// entry, written by hand, are byte for byte what encoding/json writes,
// over every field (set, changed, nil and empty) and every escape, and
// refuse what it refuses: a store reads the same whichever wrote it.
func TestRecordsEncodeAsEncodingJSONDoes(t *testing.T) {
	sameAsJSON(t, fieldcheck.Variants[Marquee](t), func(r Marquee) persistence.JSONAppender { return r })
	sameAsJSON(t, fieldcheck.Variants[marquee.Entry](t), func(e marquee.Entry) persistence.JSONAppender { return historyEntry(e) })
	// The variants' lists hold one element; the comma between two is
	// checked here.
	two := fieldcheck.Variants[Marquee](t)[0]
	two.State.Runs = []marquee.Run{{ID: 1, Generation: 2}, {ID: 3, Generation: 4}}
	entry := fieldcheck.Variants[marquee.Entry](t)[0]
	entry.Changed = []marquee.Change{{Field: "a", From: "b", To: "c"}, {Field: "d", From: "e", To: "f"}}
	sameAsJSON(t, []Marquee{two}, func(r Marquee) persistence.JSONAppender { return r })
	sameAsJSON(t, []marquee.Entry{entry}, func(e marquee.Entry) persistence.JSONAppender { return historyEntry(e) })

	var r Marquee
	r.State.Progress = marquee.Progress(99)
	_, err := r.AppendJSON(nil)
	require.Error(t, err, "an invalid progress is refused, as encoding/json refuses it")
	_, jerr := json.Marshal(r)
	require.Error(t, jerr)
	r.State.Progress = marquee.Queued
	r.State.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = r.AppendJSON(nil)
	require.Error(t, err, "a year past 9999 is refused, as encoding/json refuses it")
	_, jerr = json.Marshal(r)
	require.Error(t, jerr)
}

func sameAsJSON[T any](t *testing.T, variants []T, appender func(T) persistence.JSONAppender) {
	t.Helper()
	for _, v := range variants {
		for _, v := range []T{v, fieldcheck.WithStrings(v, awkward), fieldcheck.WithStrings(v, "")} {
			want, err := json.Marshal(v)
			require.NoError(t, err)
			got, err := appender(v).AppendJSON([]byte("prefix"))
			require.NoError(t, err)
			require.Equal(t, "prefix"+string(want), string(got))
		}
	}
}

// BenchmarkMarqueeRecordEncoding is a marquee's record encoded, as every
// step does: by hand, and by encoding/json (what it replaced).
func BenchmarkMarqueeRecordEncoding(b *testing.B) {
	r := fieldcheck.Variants[Marquee](b)[0]
	r.State.Progress = marquee.VMStarting
	b.Run("hand", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = r.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(r)
		}
	})
}
