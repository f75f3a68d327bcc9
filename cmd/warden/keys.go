package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// rekey re-encrypts every sealed secret under a new seal key (T10),
// crash-safely:
//
//  1. a new key is put first in the keyring file, the old ones kept
//     (written atomically: a crash leaves the old file or the new one);
//  2. every record not under the new key is rewritten in synced batches;
//  3. the keys no record names any more are dropped from the file.
//
// Run again after a crash, it resumes: a keyring that already holds more
// than one key is mid-rekey, and its first key is the target.
// Long: the rekey's three steps in the order above.
func rekeyCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	data := fs.String("data", envOr(getenv, "WARDEN_DATA", "./data"), "data directory (warden must be stopped)")
	keyFile := fs.String("seal-key-file", getenv("WARDEN_SEAL_KEY_FILE"), "seal keyring (default <data>/seal.key; on a cluster, the one every node is given)")
	var endpoints []string
	fs.Var(config.ListFlag{L: &endpoints}, "etcd-endpoints", "a cluster's etcd client URLs: rekey its store (every node stopped)")
	var ef etcdFlags
	ef.register(fs)
	online := fs.String("online", "", "rekey a running warden or cluster in phases: stage, activate, reseal, finish (docs/guides/cluster.md)")
	o := clientFlags(fs, getenv, "with --online reseal|finish: ")
	return func(args []string) error {
		path := keyPath(*keyFile, *data, sealKeyName)
		if *online != "" {
			return rekeyOnline(*online, path, *o, stdout)
		}
		// The store is taken before anything is written: a refused rekey
		// (warden still serving, a cluster still running) leaves the keyring
		// as it was.
		open := func() (*persistence.Store, func(), error) {
			lock, err := lockDataDir(*data)
			if err != nil {
				return nil, nil, fmt.Errorf("%w; nothing was changed", err)
			}
			if !holdsStore(*data) {
				lock.Close()
				return nil, nil, fmt.Errorf("%s holds no store; nothing was changed", *data)
			}
			st, err := persistence.Open(*data, persistence.Options{})
			if err != nil {
				lock.Close()
				return nil, nil, fmt.Errorf("%w; nothing was changed", err)
			}
			return st, func() { lock.Close() }, nil
		}
		if len(endpoints) > 0 {
			open = func() (*persistence.Store, func(), error) { return openClusterStore(endpoints, ef) }
		}
		ring, err := trust.LoadKeyring(path)
		if err != nil {
			return fmt.Errorf("seal key: %w", err)
		}
		store, done, err := open()
		if err != nil {
			return err
		}
		if len(ring.Keys) == 1 {
			ring.Rotate(time.Now())
			if err := trust.WriteFileAtomic(path, ring.Format(keyringComment("seal key"))); err != nil {
				store.Close()
				done()
				return err
			}
			fmt.Fprintf(stdout, "new seal key %s written to %s (the old one kept until every record is moved)\n", ring.Active().ID, path)
		} else {
			fmt.Fprintf(stdout, "resuming an unfinished rekey to %s\n", ring.Active().ID)
		}
		n, err := actors.Reseal(store, trust.NewSealer(ring))
		if cerr := store.Close(); err == nil {
			err = cerr
		}
		done()
		if err != nil {
			return fmt.Errorf("reseal: %w; run `warden rekey` again to resume", err)
		}
		// Every sealed secret is under the active key now: the others go.
		ring.Prune(time.Now(), 0, func(trust.Key) bool { return false })
		if err := trust.WriteFileAtomic(path, ring.Format(keyringComment("seal key"))); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d records resealed under %s; keyring holds %d key(s)\n", n, ring.Active().ID, len(ring.Keys))
		return nil
	}
}

// openClusterStore opens a cluster's store in etcd for a command that
// writes it with every node stopped: a node still holding a lease could
// write the same records (and its writes would not be fenced against ours).
func openClusterStore(endpoints []string, ef etcdFlags) (*persistence.Store, func(), error) {
	c, err := ef.dial(endpoints)
	if err != nil {
		return nil, nil, err
	}
	who, err := clusterServing(c)
	if err == nil && who != "" {
		err = fmt.Errorf("etcd:%s is serving a cluster (%s holds a lease): stop every node first", strings.Join(endpoints, ","), who)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return persistence.OpenBackend(persistence.OpenEtcd(c, etcdRequestTimeout), nil), func() { c.Close() }, nil
}

// rotateCallbackKey puts a new signing key first (T1). The old one is
// kept, retired: it verifies credentials already handed out for the token
// lifetime, then the next rotation drops it. warden reads the file at
// start, so the new key signs after the next restart.
func rotateCallbackKeyCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	data := fs.String("data", envOr(getenv, "WARDEN_DATA", "./data"), "data directory")
	keyFile := fs.String("callback-signing-key-file", getenv("WARDEN_CALLBACK_SIGNING_KEY_FILE"), "signing keyring (default <data>/callback-signing.key)")
	ttl := fs.Duration("callback-token-ttl", 24*time.Hour, "credential lifetime: how long a retired key keeps verifying")
	return func(args []string) error {
		path := keyPath(*keyFile, *data, signingKeyName)
		ring, err := trust.LoadKeyring(path)
		if err != nil {
			return err
		}
		now := time.Now()
		ring.Prune(now, *ttl, nil)
		k := ring.Rotate(now)
		if err := trust.WriteFileAtomic(path, ring.Format(keyringComment("callback signing key"))); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "new callback signing key %s; the previous one verifies until %s; restart warden to sign with the new one\n",
			k.ID, now.Add(*ttl).UTC().Format(time.RFC3339))
		return nil
	}
}

// mintCallbackToken prints a scoped credential for one marquee and
// generation, as a dispatch would give its run: for a person testing
// a workflow by hand, or a CI system that dispatches itself.
func mintCallbackTokenCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	data := fs.String("data", envOr(getenv, "WARDEN_DATA", "./data"), "data directory")
	keyFile := fs.String("callback-signing-key-file", getenv("WARDEN_CALLBACK_SIGNING_KEY_FILE"), "signing keyring (default <data>/callback-signing.key)")
	id := fs.String("marquee", "", "marquee id")
	gen := fs.Uint64("generation", 0, "generation the credential speaks for")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	return func(args []string) error {
		if !marquee.ValidID(*id) || *gen == 0 {
			return usageError("--marquee ID and --generation N (positive) are required")
		}
		if *ttl <= 0 || *ttl > 30*24*time.Hour {
			return usageError("--ttl: up to 720h")
		}
		ring, err := trust.LoadKeyring(keyPath(*keyFile, *data, signingKeyName))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, trust.MintScoped(ring, *id, *gen, time.Now().Add(*ttl)))
		return nil
	}
}

// keyPath is the keyring file given, or the default one beside the data.
func keyPath(given, data, name string) string {
	if given != "" {
		return given
	}
	return filepath.Join(data, name)
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func keyringComment(what string) string {
	return "warden " + what + ": the first key is active; keep this file private (0600)"
}
