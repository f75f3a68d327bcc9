// Package pngtext reads and writes a PNG's tEXt chunks: the README's
// screenshots carry the digest of what drew them, so that a test can say
// when one is stale.
package pngtext

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// headerEnd is where a PNG's IHDR chunk ends: signature, length, type,
// data, CRC.
const headerEnd = 8 + 4 + 4 + 13 + 4

// With returns png with a tEXt chunk key=value after its header.
func With(png []byte, key, value string) ([]byte, error) {
	if len(png) < headerEnd || string(png[12:16]) != "IHDR" {
		return nil, errors.New("not a PNG with its IHDR first")
	}
	data := append([]byte(key+"\x00"), value...)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := append([]byte{}, png[:headerEnd]...)
	out = append(out, chunk...)
	return append(out, png[headerEnd:]...), nil
}

// Get finds key's tEXt value in png.
func Get(png []byte, key string) (string, bool) {
	for i := 8; i+12 <= len(png); {
		n := int(binary.BigEndian.Uint32(png[i:]))
		if n < 0 || i+12+n > len(png) {
			break
		}
		if string(png[i+4:i+8]) == "tEXt" {
			if k, v, ok := bytes.Cut(png[i+8:i+8+n], []byte{0}); ok && string(k) == key {
				return string(v), true
			}
		}
		i += 12 + n
	}
	return "", false
}
