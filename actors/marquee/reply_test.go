package marquee_test

import (
	"encoding/json"
	"testing"

	. "github.com/wardenhq/warden/actors/marquee"
)

// callbackReply is the answer's shape for encoding/json, the oracle.
type callbackReply struct {
	Result             Answer `json:"result"`
	MarqueeID          string `json:"marquee_id"`
	Generation         uint64 `json:"generation"`
	ReceivedGeneration uint64 `json:"received_generation"`
	Reason             string `json:"reason,omitempty"`
}

// TestReplyEncodesAsEncodingJSONDoes: a callback's answer is written by
// hand, and a client, or a repeated delivery reading the stored answer,
// gets the bytes encoding/json gives CallbackReply, escapes and all.
func TestReplyEncodesAsEncodingJSONDoes(t *testing.T) {
	for _, c := range []struct {
		id         string
		gen, recvd uint64
		answer     Answer
		reason     string
	}{
		{"m-001", 1, 1, Applied, ""},
		{"m-7", 0, 18446744073709551615, Stale, "generation 18446744073709551615 is ahead"},
		{`a"b\c<d>&é` + "\u2028\x01", 42, 41, Answer("ünknown"), `why "<&>"` + "\u2029\x02"},
		{"", 3, 0, Answer(""), ""},
	} {
		got := Reply(State{ID: c.id, Generation: c.gen}, Callback{Generation: c.recvd}, c.answer, c.reason)
		want, err := json.Marshal(callbackReply{Result: c.answer, MarqueeID: c.id, Generation: c.gen, ReceivedGeneration: c.recvd, Reason: c.reason})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Reply(%q) = %s, encoding/json: %s", c.id, got, want)
		}
	}
}
