package main

// The commands as a command line reaches them, for the tests that hold a
// command line rather than a cobra tree: each parses as cobra does (flags
// anywhere, --long) and runs the command's own code.

import (
	"errors"
	"flag"
	"io"

	"github.com/spf13/pflag"

	"github.com/wardenhq/warden/cmd/warden/internal/config"
)

// runEnv is `warden env ARGS...` for callers that hold a command line.
func runEnv(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return run(append([]string{"env"}, args...), getenv, stdout, stderr)
}

// keygen writes what the nodes of a cluster share into dir, each only if
// absent: the seal keyring, the callback signing keyring, the cluster
// token and the cluster CA, all 0600. With --node it also writes that
// node's certificate for etcd's mutual TLS (--host: the addresses and
// names it is reached by; --rotate: a new one even if it has one).
// `make cluster` runs it before starting the nodes.
func keygen(args []string, stdout io.Writer) error {
	return parseAndRun("keygen", func(fs *flag.FlagSet) func([]string) error { return keygenCommand(fs, stdout) }, args)
}

// rekey is `warden rekey ARGS...` for callers that hold a command line.
func rekey(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return parseAndRun("rekey", func(fs *flag.FlagSet) func([]string) error { return rekeyCommand(fs, getenv, stdout, stderr) }, args)
}

// parseCallback reads one invocation from a command line and the
// environment.
func parseCallback(args []string, getenv func(string) string, _ io.Writer) (*callbackOptions, error) {
	var o *callbackOptions
	err := parseAndRun("callback", func(fs *flag.FlagSet) func([]string) error {
		parse := callbackFlags(fs, getenv)
		return func(args []string) (err error) {
			o, err = parse(args)
			return err
		}
	}, args)
	return o, err
}

// parseAndRun parses args as cobra would for define's command and runs it:
// for callers that hold a command line, not a cobra tree (tests, the
// cluster's process helpers).
func parseAndRun(name string, define defineFunc, args []string) error {
	gfs := flag.NewFlagSet(name, flag.ContinueOnError)
	run := define(gfs)
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.AddGoFlagSet(gfs)
	if err := fs.Parse(args); err != nil {
		return usageError("%v", err)
	}
	return run(fs.Args())
}

// parseConfig reads serve's configuration from a command line and the
// environment, as `warden serve` does.
func parseConfig(args []string, getenv func(string) string, _ io.Writer) (config.Serve, error) {
	gfs := flag.NewFlagSet("serve", flag.ContinueOnError)
	finish := config.Declare(gfs, getenv)
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.AddGoFlagSet(gfs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return config.Serve{}, errFlagHelp
		}
		return config.Serve{}, statusError{exitUsage, err}
	}
	c, err := finish(fs.Args(), fs.Changed)
	if err != nil {
		return c, serveConfigError(err)
	}
	return c, nil
}

func serve(args []string, getenv func(string) string, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		if errors.Is(err, errFlagHelp) {
			return nil
		}
		return err
	}
	return serveConfig(c, stderr)
}

var errFlagHelp = errors.New("flag: help requested")
