package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
)

func TestDecodeCallbackNamesTheField(t *testing.T) {
	for body, field := range map[string]string{
		`{"marquee_id":"m-1","verb":"step","generation":1}`:                                                                         "field step",
		`{"marquee_id":"m-1","verb":"step","generation":1,"step":"teleporting"}`:                                                    "field step",
		`{"marquee_id":"m-1","verb":"null","generation":-1}`:                                                                        "field generation",
		`{"marquee_id":"m-1","verb":"null"}`:                                                                                        "field generation",
		`{"marquee_id":"M 1","verb":"null","generation":1}`:                                                                         "field marquee_id",
		`{"marquee_id":"m-1","verb":"null","generation":1,"extra":true}`:                                                            `unknown field "extra"`,
		`{"marquee_id":"m-1","verb":"null","generation":1,"connection":{}}`:                                                         "field connection",
		`{"marquee_id":"m-1","verb":"deployed","generation":1,"connection":{"host":"h"}}`:                                           "connection.user",
		`{"marquee_id":"m-1","verb":"deployed","generation":1,"connection":{"host":"h","port":0,"user":"u","ssh_private_key":"k"}}`: "connection.port",
		`{"marquee_id":"m-1","verb":"null","generation":1} {}`:                                                                      "after the JSON object",
		`[]`: "wrong type",
	} {
		_, _, err := DecodeCallback([]byte(body))
		require.Error(t, err, body)
		require.Contains(t, err.Error(), field, body)
	}
	id, cb, err := DecodeCallback([]byte(`{"marquee_id":"m-1","verb":"step","generation":0,"step":"tls_provisioning"}`))
	require.NoError(t, err)
	require.Equal(t, "m-1", id)
	require.Equal(t, marquee.Callback{Verb: marquee.VerbStep, Generation: 0, Step: marquee.TLSProvisioning}, cb)
}

func TestDecodeCreate(t *testing.T) {
	c, err := DecodeCreate([]byte(`{"id":"m-1","kind":"tutorial","pool":"default"}`))
	require.NoError(t, err)
	require.Equal(t, marquee.Create{ID: "m-1", Kind: marquee.Tutorial, Pool: "default"}, c)
	for _, body := range []string{
		`{"id":"m-1","kind":"byo"}`,
		`{"id":"m-1","kind":"vm"}`,
		`{"id":"m-1","kind":"tutorial","connection":{"host":"h","port":22,"user":"u","ssh_private_key":"k"}}`,
		`{"id":"m-1","kind":"byo","pool":"x","connection":{"host":"h","port":22,"user":"u","ssh_private_key":"k"}}`,
		`{"id":"` + strings.Repeat("a", 64) + `","kind":"tutorial"}`,
	} {
		_, err := DecodeCreate([]byte(body))
		require.Error(t, err, body)
	}
}

// rejected reports whether a decoder refused its input, requiring that a
// refusal is the 400 kind (never a panic or another error).
func rejected(t *testing.T, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	var iv *invalid
	require.ErrorAs(t, err, &iv)
	return true
}

// FuzzDecodeCallback: any bytes give a valid Callback or a 400 error, never
// a panic, and an accepted callback always satisfies what the machine
// assumes (a known verb, a connection exactly for deployed).
func FuzzDecodeCallback(f *testing.F) {
	f.Add([]byte(`{"marquee_id":"m-1","verb":"step","generation":1,"step":"vm_starting"}`))
	f.Add([]byte(`{"marquee_id":"m-1","verb":"deployed","generation":4,"connection":{"host":"h","port":22,"user":"u","ssh_private_key":"k","acme_dns":{"username":"x"}}}`))
	f.Add([]byte(`{"marquee_id":"m-1","verb":"failed","generation":0,"reason":"\u00ff"}`))
	f.Add([]byte(`{"marquee_id":"m-1","verb":"null","generation":18446744073709551615}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		id, cb, err := DecodeCallback(body)
		if rejected(t, err) {
			return
		}
		require.True(t, marquee.ValidID(id))
		require.Equal(t, cb.Verb == marquee.VerbDeployed, cb.Connection != nil)
		require.LessOrEqual(t, len(cb.Reason), maxReason)
		known := false
		for _, v := range marquee.Verbs {
			known = known || v == cb.Verb
		}
		require.True(t, known)
	})
}

func FuzzDecodeCreate(f *testing.F) {
	f.Add([]byte(`{"id":"m-1","kind":"tutorial"}`))
	f.Add([]byte(`{"id":"b-1","kind":"byo","connection":{"host":"h","port":22,"user":"u","ssh_private_key":"k"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeCreate(body)
		if err != nil {
			return
		}
		require.True(t, marquee.ValidID(c.ID))
		require.Equal(t, c.Kind == marquee.BYO, c.Connection != nil)
	})
}

func FuzzDecodeDestroy(f *testing.F) {
	f.Add([]byte(`{"reap":true}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := decodeDestroy(body, "op")
		if err == nil {
			_, ok := ev.(marquee.Destroy)
			require.True(t, ok)
		}
	})
}

// FuzzDecodeEnvCreate: any bytes give a valid environment Create or a 400
// error, and an accepted one satisfies what the machine assumes (E1, E2).
func FuzzDecodeEnvCreate(f *testing.F) {
	f.Add([]byte(`{"id":"env-271","branch":"feature-search","revision":"3f2c9e1","ttl":"72h"}`))
	f.Add([]byte(`{"id":"env-1","branch":"main","revision":"r","data":"preserve","ttl":"-1s"}`))
	f.Add([]byte(`{"id":"env-1","branch":"main","revision":"r","extra":1}`))
	f.Add([]byte(`{"id":"env-1","branch":"main","revision":"r","data_from":"demo"}`))
	f.Add([]byte(`{"id":"env-1","branch":"main","revision":"r","data_from":"Demo; DROP"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeEnvCreate(body)
		if rejected(t, err) {
			return
		}
		require.True(t, c.DataFrom == "" || environment.ValidSeed(c.DataFrom), "a seed's name the platform can use")
		require.True(t, environment.ValidID(c.ID))
		require.True(t, environment.ValidID(c.Branch))
		require.True(t, environment.ValidRevision(c.Revision))
		require.NotContains(t, c.Revision, "/")
		require.LessOrEqual(t, len(c.Revision), 64)
		require.Contains(t, []environment.DataPolicy{"", environment.Disposable, environment.Preserve}, c.Data)
		require.GreaterOrEqual(t, c.TTL, time.Duration(0))
		require.LessOrEqual(t, c.TTL, 90*24*time.Hour)
	})
}

// FuzzDecodeReason: the body of removals and manual actions (E16) is
// empty or one object with bounded fields, else a 400 error.
func FuzzDecodeReason(f *testing.F) {
	f.Add([]byte(`{"reason":"branch merged","actor":"ana"}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"reason":"x","who":"y"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeReason(body)
		if rejected(t, err) {
			return
		}
		require.LessOrEqual(t, len(r.Reason), maxReason)
		require.LessOrEqual(t, len(r.Actor), maxField)
	})
}

// FuzzDecodeCursor: a list cursor comes from the client; whatever it is,
// decoding never panics, accepts only what encodeCursor can give for its
// kind, and an accepted cursor encodes back to itself.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("")
	f.Add(encodeCursor("marquee", "m-1"))
	f.Add(encodeCursor("environment", "env-271"))
	f.Add("bWFycXVlZTpNLTE")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, cursor string) {
		for _, kind := range []string{"marquee", "environment"} {
			id, err := decodeCursor(kind, cursor, marquee.ValidID)
			if err != nil {
				if !strings.Contains(err.Error(), "cursor") {
					t.Fatalf("unclear error %q", err)
				}
				continue
			}
			if cursor != "" && (!marquee.ValidID(id) || encodeCursor(kind, id) != cursor) {
				t.Fatalf("accepted %q as %q for %s", cursor, id, kind)
			}
		}
	})
}

// FuzzDecodeEnvDryRun: an environment dry run's body is exactly one of a
// known action with its reason and a removal, within the limits, or a
// refusal; never a panic.
func FuzzDecodeEnvDryRun(f *testing.F) {
	f.Add([]byte(`{"action":"repair","reason":"container killed"}`))
	f.Add([]byte(`{"remove":{"reason":"branch merged"}}`))
	f.Add([]byte(`{"action":"repair","remove":{}}`))
	f.Add([]byte(`{"action":"frob"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := decodeEnvDryRun(body)
		if rejected(t, err) {
			return
		}
		require.True(t, (b.Action == "") != (b.Remove == nil), "exactly one of action and remove")
		require.LessOrEqual(t, len(b.Reason), maxReason)
		if b.Remove != nil {
			require.LessOrEqual(t, len(b.Remove.Reason), maxReason)
		}
	})
}
