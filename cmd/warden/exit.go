package main

import (
	"errors"
	"fmt"

	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/persistence"
)

// Exit statuses (docs/guides/failures.md). A service manager restarts
// warden on a storage failure (the disk may be fixed, or a restart finds
// it read-only and serves reads, S4) but not on a damaged store or a
// configuration it refuses: restarting those would only repeat the
// refusal (examples/systemd's RestartPreventExitStatus).
const (
	exitFailure = 1  // anything else
	exitCorrupt = 65 // EX_DATAERR: the store is damaged and refused, or newer than this build
	exitStorage = 74 // EX_IOERR: a write or sync failed while running
	exitConfig  = 78 // EX_CONFIG: the configuration is refused
)

// statusError is a command's failure with the exit status it means.
type statusError struct {
	code int
	err  error
}

func (e statusError) Error() string { return e.err.Error() }
func (e statusError) Unwrap() error { return e.err }

// exitStatusOf is the status an error from serve means.
func exitStatusOf(err error) int {
	var se statusError
	var corrupt *persistence.CorruptStoreError
	var f *persistence.Failure
	var newer *persistence.NewerFormatError
	switch {
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &corrupt), errors.As(err, &newer), errors.As(err, &f) && f.Cause == persistence.Corrupted:
		return exitCorrupt
	case errors.As(err, &f):
		return exitStorage
	}
	return exitFailure
}

// serveConfigError is the exit of serve's configuration refused: a
// command line it cannot read is a usage error, anything else a refused
// configuration.
func serveConfigError(err error) error {
	var usage config.UsageError
	if errors.As(err, &usage) {
		return usageError("%s", usage)
	}
	return configError(err)
}

// configError marks a refused configuration.
func configError(err error) error { return statusError{exitConfig, err} }

func usageError(format string, args ...any) error {
	return statusError{exitUsage, fmt.Errorf(format, args...)}
}
