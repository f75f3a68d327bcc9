package persistence

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Encoding: one version byte, then JSON. The version says how the rest is
// read; a value that does not decode is a CorruptError naming its key.

// codecV1 is the only encoding so far: a version byte then JSON.
const codecV1 byte = 1

// Encode is v's stored form: the version byte, then JSON. Records are the
// project's own types, which always encode; one that does not is a bug.
func Encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("persistence: encode %T: %v", v, err)) // our own types always encode
	}
	return append([]byte{codecV1}, b...)
}

// Decode reads a stored value into v; a value that does not decode is a
// *CorruptError naming its key (A8).
func Decode(key, val []byte, v any) error {
	if len(val) == 0 {
		return &CorruptError{Malformed{Key: string(key), Reason: "empty value"}}
	}
	if val[0] != codecV1 {
		return &CorruptError{Malformed{Key: string(key), Reason: fmt.Sprintf("unknown encoding version %d", val[0])}}
	}
	dec := json.NewDecoder(bytes.NewReader(val[1:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &CorruptError{Malformed{Key: string(key), Reason: "does not decode: " + err.Error()}}
	}
	return nil
}
