package record

import (
	"testing"

	"github.com/wardenhq/warden/persistence"
)

// BenchmarkDecodeMarqueeRecord: the store's reader of a marquee record
// against encoding/json's Decoder, the reader before it, in the same run
// (go test ./actors/record -run '^$' -bench DecodeMarqueeRecord -benchmem).
func BenchmarkDecodeMarqueeRecord(b *testing.B) {
	stored := persistence.Encode(withSecret("m-0000001"))
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var m Marquee
			if err := readAsEncodingJSON(stored[1:], &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			var m Marquee
			if err := persistence.Decode([]byte("m/m-0000001"), stored, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}
