package persistence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Pebble's messages go to the structured log: routine ones at debug,
// errors at error; none is dropped. Its Fatalf is the write path's failure
// report (a WAL write or sync, the manifest, a commit): it seals the store
// and never returns.

type pebbleLogger struct {
	log     *slog.Logger
	health  *Health
	onFatal func()
}

func newPebbleLogger(l *slog.Logger, h *Health, onFatal func()) pebbleLogger {
	if onFatal == nil {
		onFatal = blockForever
	}
	return pebbleLogger{log: logger(l).With("component", "pebble"), health: h, onFatal: onFatal}
}

// blockForever is what Fatalf does after sealing: the goroutine that met
// the failure holds Pebble's commit pipeline and must not go on as if its
// write had happened. The process exits soon after.
func blockForever() { select {} }

func (l pebbleLogger) Infof(format string, args ...any) { debugf(l.log, format, args...) }

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// Fatalf seals the store with the failure it reports, then does not
// return.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, args...))
	var cause error = errors.New(msg)
	for _, a := range args {
		if err, ok := a.(error); ok {
			cause = fmt.Errorf("%s: %w", msg, err)
			break
		}
	}
	l.health.Seal(&Failure{Cause: Classify(cause), Op: fatalOp(msg), Err: cause})
	l.onFatal()
}

// fatalOp names where in the write path Pebble failed, from its message.
func fatalOp(msg string) string {
	switch {
	case strings.Contains(msg, "commit"):
		return walFailureOp
	case strings.Contains(msg, "MANIFEST"):
		return "manifest write"
	}
	return "pebble"
}

// eventListener logs every Pebble event at debug, and turns a background
// error (a flush or compaction that failed) into a seal: the store's own
// maintenance cannot run, so the next commits would stall on a full
// memtable or hide the problem until later.
func eventListener(l *slog.Logger, h *Health) *pebble.EventListener {
	log := logger(l).With("component", "pebble")
	routine := pebble.MakeLoggingEventListener(debugLogger{log})
	ours := pebble.EventListener{
		BackgroundError: func(err error) {
			h.Seal(&Failure{Cause: Classify(err), Op: "flush or compaction", Err: err})
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("data corruption", "file", info.Path, "err", fmt.Sprint(info.Details))
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			log.Warn("disk slow", "info", info.String())
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			h.stalled.Store(true)
			log.Warn("write stall", "reason", info.Reason)
		},
		WriteStallEnd: func() {
			h.stalled.Store(false)
		},
	}
	tee := pebble.TeeEventListener(routine, ours)
	return &tee
}

// debugLogger is Pebble's Logger at debug, for its routine events; the
// logging listener's own error lines are repeated by ours at error.
type debugLogger struct{ log *slog.Logger }

func (d debugLogger) Infof(format string, args ...any)  { debugf(d.log, format, args...) }
func (d debugLogger) Errorf(format string, args ...any) { debugf(d.log, format, args...) }

// debugf logs a Pebble message at debug, formatted only when debug is
// on: its events' descriptions (each flush, compaction and log file) are
// made with fmt and stripped of redaction markers by a regular
// expression, for a line that is dropped at the default level.
func debugf(log *slog.Logger, format string, args ...any) {
	if log.Enabled(context.Background(), slog.LevelDebug) {
		log.Debug(strings.TrimSpace(fmt.Sprintf(format, args...)))
	}
}

func (d debugLogger) Fatalf(format string, args ...any) {
	d.log.Error(strings.TrimSpace(fmt.Sprintf(format, args...)))
}
