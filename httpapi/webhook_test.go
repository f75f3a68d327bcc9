package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSimpleCallbackFormIsReadByHandAndTheRestStrictly: the bodies a
// workflow sends for a step, a null or a failure are read by the simple
// form; every other form goes to strictDecode, whose refusals name the
// field.
func TestSimpleCallbackFormIsReadByHandAndTheRestStrictly(t *testing.T) {
	for _, body := range []string{
		`{"marquee_id":"m-001","verb":"step","generation":1,"step":"vm_starting"}`,
		" {\n\t\"marquee_id\" : \"m-1\" ,\r\n \"verb\":\"null\",\"generation\":18446744073709551615 } ",
		`{"marquee_id":"m-1","verb":"failed","generation":0,"reason":"apply failed: exit 1"}`,
		`{}`,
	} {
		var w wireCallback
		require.True(t, decodeSimple([]byte(body), &w), "simple: %s", body)
	}
	for _, body := range []string{
		``, `{`, `{"marquee_id":"m-1",}`, `{"marquee_id":"m-1"} x`, `[]`, `{"marquee_id":"m-1"}{}`,
		`{"marquee_id":"m\u002d1","verb":"step"}`,           // an escape
		`{"marquee_id":"m-1","reason":"é"}`,                 // not ASCII
		`{"marquee_id":"m-1","marquee_id":"m-2"}`,           // repeated
		`{"marquee_id":"m-1","extra":"x"}`,                  // unknown
		`{"Verb":"step"}`,                                   // names match exactly
		`{"verb":null}`, `{"generation":"1"}`, `{"verb":1}`, // other types
		`{"generation":01}`, `{"generation":-1}`, `{"generation":1.0}`, `{"generation":1e3}`,
		`{"generation":18446744073709551616}`, // past uint64
		`{"marquee_id":"m-1","verb":"deployed","generation":2,"connection":{"host":"h"}}`,
		"{\"reason\":\"a\tb\"}", // a control character
	} {
		var w wireCallback
		require.False(t, decodeSimple([]byte(body), &w), "not simple: %s", body)
	}
	_, _, err := DecodeCallback([]byte(`{"marquee_id":"m-1","verb":"step","generation":1,"step":"vm_starting","extra":1}`))
	require.EqualError(t, err, `unknown field "extra"`, "the strict reading names what is wrong")
}

// FuzzSimpleCallbackDecodesAsStrictDoes: whatever the simple form
// accepts, strictDecode accepts too and reads into the same fields.
func FuzzSimpleCallbackDecodesAsStrictDoes(f *testing.F) {
	f.Add([]byte(`{"marquee_id":"m-001","verb":"step","generation":1,"step":"vm_starting"}`))
	f.Add([]byte(`{"marquee_id":"m-1","verb":"failed","generation":0,"reason":"x y"}`))
	f.Add([]byte(" {\"generation\" : 18446744073709551615 } "))
	f.Add([]byte(`{"generation":18446744073709551616}`))
	f.Add([]byte(`{"verb":"a","verb":"b"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var simple wireCallback
		if !decodeSimple(body, &simple) {
			return
		}
		var strict wireCallback
		require.NoError(t, strictDecode(body, &strict), "the simple form accepted what the strict one refuses: %q", body)
		require.Equal(t, strict, asStrictFills(simple), "read differently: %q", body)
	})
}

// asStrictFills is w as the strict decoder would fill it: Generation's
// value moved out of the simple reader's room for it.
func asStrictFills(w wireCallback) wireCallback {
	if w.Generation != nil {
		g := *w.Generation
		w.Generation = &g
	}
	w.generation = 0
	return w
}
