// Command warden is the supervisor process: `warden serve` runs the HTTP API
// over the actor system and its Pebble store.
package main

import (
	"fmt"
	"os"

	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/sim"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:], os.Getenv, os.Stderr)
	case "callback":
		os.Exit(runCallback(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	case "env":
		os.Exit(runEnv(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	case "rekey":
		err = rekey(os.Args[2:], os.Getenv, os.Stdout, os.Stderr)
	case "rotate-callback-key":
		err = rotateCallbackKey(os.Args[2:], os.Getenv, os.Stdout, os.Stderr)
	case "mint-callback-token":
		err = mintCallbackToken(os.Args[2:], os.Getenv, os.Stdout, os.Stderr)
	case "sim":
		os.Exit(sim.Main(os.Args[2:], os.Stdout, os.Stderr, mdreport.Replace))
	case "version", "--version":
		fmt.Println(buildinfo.Read())
		return
	case "help", "-h", "--help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "warden: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warden:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: warden <command> [flags]

commands:
  serve                run the supervisor: HTTP API, actors, Pebble store (warden serve -h for flags)
  version              print the version, commit and Go version
  sim                  deterministic simulation: warden sim --seed N | --seeds K [--from N] [--check-determinism]
  callback             send one callback from a workflow (warden callback -h; configured from the environment)
  env                  ask warden for a preview environment or its removal: warden env create|remove|action|get (WARDEN_URL, WARDEN_OPERATOR_TOKEN)
  rekey                re-encrypt every sealed secret under a new seal key (warden stopped; resumes after a crash)
  rotate-callback-key  start a new scoped-credential signing key; the old one verifies for --callback-token-ttl
  mint-callback-token  print a scoped callback credential: --marquee ID --generation N [--ttl 1h]`)
}
