package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// The data's life from the command line (D4-D7, D9): backup asks a
// running warden; verify reads a stopped store (or asks a running one);
// restore and migrate write a new store from a checked source.

// exitProblems is verify's status when the store has a problem: the data
// is wrong, not the command (EX_DATAERR, as a damaged store at start).
const exitProblems = exitCorrupt

// verifyFlags are what an offline check needs of the configuration.
type verifyFlags struct {
	data, keyFile string
	pools         config.Pools
	rules         marquee.Config
	retention     time.Duration
	json          bool
}

func (v *verifyFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	v.pools = config.Pools{}
	v.rules = marquee.DefaultConfig()
	fs.StringVar(&v.data, "data", envOr(getenv, "WARDEN_DATA", "./data"), "data directory")
	fs.StringVar(&v.keyFile, "seal-key-file", getenv("WARDEN_SEAL_KEY_FILE"), "seal keyring (default <data>/seal.key)")
	fs.Var(v.pools, "pool", "a pool's limit, name=limit, as warden serve is given it (repeatable): checked against its reservations")
	config.RuleFlags(fs, &v.rules)
	fs.DurationVar(&v.retention, "dedup-retention", 72*time.Hour, "how long deliveries are kept, as warden serve is given it")
	fs.BoolVar(&v.json, "json", false, "print the report as JSON")
}

func (v *verifyFlags) options(sealer *trust.Sealer) actors.VerifyOptions {
	return actors.VerifyOptions{Sealer: sealer, Machine: marquee.Machine{Config: v.rules},
		EnvMachine: environment.Machine{Config: environment.DefaultConfig()}, Pools: v.pools, DedupRetention: v.retention}
}

// sealerFor loads the seal keyring if there is one (a store written
// without one holds no sealed field, and verify says so if it does).
func sealerFor(path string) (*trust.Sealer, *trust.Keyring, error) {
	ring, err := trust.LoadKeyring(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("seal key: %w", err)
	}
	return trust.NewSealer(ring), ring, nil
}

func printReport(w io.Writer, rep actors.VerifyReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprint(w, rep.Text())
	}
	if !rep.OK() {
		return statusError{exitProblems, fmt.Errorf("verify: %d problem(s) in the store", len(rep.Problems)+rep.Unlisted)}
	}
	return nil
}

// verifyCmd is `warden verify`: offline on a stopped store, a backup in
// place (--backup), or --live.
func verifyCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	var v verifyFlags
	v.register(fs, getenv)
	live := fs.Bool("live", false, "ask a running warden to check its store at one instant (--server, --token-file)")
	backup := fs.String("backup", "", "check a backup directory in place, read-only: its manifest, its keys and its records")
	o := clientFlags(fs, getenv, "with --live: ")
	return func(args []string) error {
		switch {
		case *live:
			return verifyLive(*o, stdout, v.json)
		case *backup != "":
			return verifyBackupCmd(*backup, v, stdout)
		}
		if st, err := os.Stat(v.data); err != nil || !st.IsDir() {
			return fmt.Errorf("no data directory at %s (--data)", v.data)
		}
		lock, err := lockToRead(v.data)
		if err != nil {
			return fmt.Errorf("%w (warden is serving on %s: use warden verify --live)", err, v.data)
		}
		if lock != nil {
			defer lock.Close()
		}
		sealer, _, err := sealerFor(keyPath(v.keyFile, v.data, sealKeyName))
		if err != nil {
			return err
		}
		if !holdsStore(v.data) {
			return fmt.Errorf("%s holds no store (a data directory warden serve has used)", v.data)
		}
		st, err := persistence.OpenReadOnly(v.data, nil)
		if err != nil {
			return err
		}
		defer st.Close()
		start := time.Now()
		rep, err := actors.Verify(st, v.options(sealer))
		if err != nil {
			return err
		}
		if !v.json {
			fmt.Fprintf(stdout, "verified %s in %s\n", v.data, time.Since(start).Round(time.Millisecond))
		}
		return printReport(stdout, rep, v.json)
	}
}

// holdsStore reports whether dir holds a Pebble store (its manifest's
// marker, or the CURRENT file of older stores).
func holdsStore(dir string) bool {
	names, _ := filepath.Glob(filepath.Join(dir, "marker.manifest.*"))
	_, err := os.Stat(filepath.Join(dir, "CURRENT"))
	return len(names) > 0 || err == nil
}

// verifyBackupCmd is `warden verify --backup DIR`: the checks restore
// makes before it writes anything, and the store's, read-only.
func verifyBackupCmd(dir string, v verifyFlags, stdout io.Writer) error {
	sealer, ring, err := sealerFor(keyPath(v.keyFile, v.data, sealKeyName))
	if err != nil {
		return err
	}
	man, rep, err := checkBackup(dir, v, sealer, ring)
	if err != nil {
		return statusError{exitProblems, fmt.Errorf("the backup in %s: %w", dir, err)}
	}
	fmt.Fprintf(stdout, "backup %s (%s, store format %d, taken %s by warden %s): %d files as its manifest says; %d marquees, %d environments; seal key ids needed: %s\n",
		dir, man.Backend, man.Format, man.TakenAt.Format(time.RFC3339), man.TakenBy, len(man.Files), rep.Marquees, rep.Envs, keyList(man.SealKeyIDs))
	return printReport(stdout, rep, v.json)
}

// checkBackup is every check a backup passes before a byte of it is
// restored (D5): its files against its manifest, the seal keys it needs
// against the keyring, its records verified in place (read-only), and
// what they count against what the manifest says it holds.
func checkBackup(dir string, v verifyFlags, sealer *trust.Sealer, ring *trust.Keyring) (manifest, actors.VerifyReport, error) {
	man, err := checkBackupDir(dir)
	if err != nil {
		return man, actors.VerifyReport{}, err
	}
	if missing := missingKeys(man, ring); len(missing) > 0 {
		return man, actors.VerifyReport{}, fmt.Errorf("its records are sealed under key id(s) %s, which %s does not hold; put the keyring that does there (or pass --seal-key-file)",
			strings.Join(missing, ", "), keyPath(v.keyFile, v.data, sealKeyName))
	}
	var rep actors.VerifyReport
	if man.Backend == backendEtcd {
		rep, err = verifySnapshot(filepath.Join(dir, etcdSnapshot), v.options(sealer))
	} else {
		rep, err = verifyInPlace(filepath.Join(dir, backupStoreDir), v.options(sealer))
	}
	if err != nil {
		return man, rep, err
	}
	if rep.Marquees != man.Marquees || rep.Envs != man.Envs {
		return man, rep, fmt.Errorf("its store holds %d marquees and %d environments; its manifest says %d and %d: records are missing (a cut log?) or the manifest was altered",
			rep.Marquees, rep.Envs, man.Marquees, man.Envs)
	}
	return man, rep, nil
}

func verifyLive(o clientOptions, stdout io.Writer, asJSON bool) error {
	answer, err := o.call("GET", "/v1/admin/verify", nil)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(answer["report"])
	var rep actors.VerifyReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("verify --live: the report does not decode: %w", err)
	}
	return printReport(stdout, rep, asJSON)
}

func verifyInPlace(dir string, o actors.VerifyOptions) (actors.VerifyReport, error) {
	st, err := persistence.OpenReadOnly(dir, nil)
	if err != nil {
		return actors.VerifyReport{}, err
	}
	defer st.Close()
	rep, err := actors.Verify(st, o)
	if err != nil {
		return rep, err
	}
	if !rep.OK() {
		return rep, fmt.Errorf("its records do not verify:\n%s", rep.Text())
	}
	return rep, nil
}
