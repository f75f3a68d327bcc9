package persistence

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// described counts how often a Pebble event's description is made.
type described struct{ n *int }

func (d described) String() string { *d.n++; return "flushed 1 memtable" }

// TestPebbleMessagesAreMadeOnlyWhenDebugIsOn: Pebble's routine messages go
// to the log at debug, and at any other level their descriptions are not
// made at all (each one is fmt and a regular expression, for a line that
// would be dropped).
func TestPebbleMessagesAreMadeOnlyWhenDebugIsOn(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var out bytes.Buffer
		log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level}))
		n := 0
		newPebbleLogger(log, nil, nil).Infof("[JOB 1] %s", described{&n})
		debugLogger{log}.Infof("[JOB 2] %s", described{&n})
		debugLogger{log}.Errorf("[JOB 3] %s", described{&n})
		if level == slog.LevelDebug {
			require.Equal(t, 3, n)
			require.Equal(t, 3, bytes.Count(out.Bytes(), []byte("flushed 1 memtable")), "%s", out.String())
			continue
		}
		require.Zero(t, n, "a description made for a line the level drops")
		require.Empty(t, out.String())
	}
}
