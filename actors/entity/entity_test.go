package entity

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type effect string

func (e effect) String() string { return "do(" + string(e) + ")" }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFormatPrintsEveryPartInOneOrder(t *testing.T) {
	r := Outcome[string, effect, string]{Answer: "applied", Reply: []byte(`{"ok":true}`), Records: []string{"line 1", "line 2"},
		Effects: []effect{"a", "b"}, Wake: epoch.Add(90 * time.Second), Changed: true}
	require.Equal(t, "answer: applied\nreply: {\"ok\":true}\nrecord: line 1\nrecord: line 2\neffect: do(a)\neffect: do(b)\nwake: +1m30s\n", Format(r, epoch))

	due := Outcome[string, effect, string]{Answer: "ignored", Wake: epoch}
	require.Equal(t, "answer: ignored\nwake: now\nunchanged\n", Format(due, epoch))

	refused := Outcome[string, effect, string]{Err: errors.New("not now"), Answer: "hidden", Changed: true}
	require.Equal(t, "error: not now\n", Format(refused, epoch), "a refusal shows nothing else: nothing else happens")
}

func TestWritesOnlyWhatTheStepProduced(t *testing.T) {
	require.False(t, Outcome[string, effect, string]{Effects: []effect{"a"}, Wake: epoch}.Writes(), "effects and a wake alone write nothing")
	require.True(t, Outcome[string, effect, string]{Changed: true}.Writes())
	require.True(t, Outcome[string, effect, string]{Records: []string{"x"}}.Writes(), "a history line of an unchanged state is kept")
	require.True(t, Outcome[string, effect, string]{Reply: []byte("{}")}.Writes(), "a reply is kept for its delivery (M20)")
}
