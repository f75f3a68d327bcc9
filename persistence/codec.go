package persistence

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

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
