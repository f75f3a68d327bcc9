package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/internal/cluster"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
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
	fs.Var(v.pools, "pool", "a pool's limit, name=limit, as warden serve is given it (repeatable): checked against its reservations (I7)")
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
	backup := fs.String("backup", "", "check a backup directory in place, read-only: its manifest, its keys and its records (D5)")
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

// backupCmd is `warden backup --to DIR`: the running warden streams a
// consistent copy; every file is checked against its manifest as it lands.
func backupCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	to := fs.String("to", "", "directory to write the backup into (new or empty)")
	o := clientFlags(fs, getenv, "")
	return func(args []string) error {
		if *to == "" {
			return usageError("--to DIR is required")
		}
		if err := emptyDir(*to); err != nil {
			return fmt.Errorf("--to: %w (a backup never writes over anything)", err)
		}
		c, err := o.client()
		if err != nil {
			return err
		}
		req, err := c.request("POST", "/v1/admin/backup", nil)
		if err != nil {
			return err
		}
		// No client timeout: the stream is as long as the store is large.
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			return fmt.Errorf("backup refused: %d %s", resp.StatusCode, strings.TrimSpace(string(raw)))
		}
		if err := os.MkdirAll(*to, 0o700); err != nil {
			return err
		}
		man, err := readBackupTar(resp.Body, *to)
		if err != nil {
			return fmt.Errorf("backup into %s is not usable: %w", *to, err)
		}
		fmt.Fprintf(stdout, "backup of %s (%s, store format %d) taken %s: %d marquees, %d environments, %d files, %d bytes; seal key ids needed: %s\n",
			c.server, man.Backend, man.Format, man.TakenAt.Format(time.RFC3339), man.Marquees, man.Envs, len(man.Files), man.bytes(), keyList(man.SealKeyIDs))
		return nil
	}
}

func keyList(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}

// restoreCmd is `warden restore --from DIR --data NEW`: a backup is
// checked against its manifest and verified (D6) in place before a byte
// of it is copied; what it restored is counted from the restored store.
func restoreCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	from := fs.String("from", "", "backup directory (warden backup --to)")
	var v verifyFlags
	v.register(fs, getenv)
	var ec etcdRestore
	ec.register(fs)
	return func(args []string) error {
		if *from == "" {
			return usageError("--from DIR is required")
		}
		if err := newDataDir(v.data); err != nil {
			return fmt.Errorf("--data: %w (restore into a new data directory)", err)
		}
		sealer, ring, err := sealerFor(keyPath(v.keyFile, v.data, sealKeyName))
		if err != nil {
			return err
		}
		man, rep, err := checkBackup(*from, v, sealer, ring)
		if err != nil {
			return fmt.Errorf("refusing the backup: %w", err)
		}
		if man.Backend == backendEtcd {
			return ec.restore(*from, v, sealer, stdout)
		}
		lock, err := takeDataDir(v.data)
		if err != nil {
			return err
		}
		defer lock.Close()
		if err := copyTree(filepath.Join(*from, backupStoreDir), v.data); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		marquees, envs, err := countRestored(v.data)
		if err == nil && (marquees != rep.Marquees || envs != rep.Envs) {
			err = fmt.Errorf("the restored store holds %d marquees and %d environments; the backup verified with %d and %d", marquees, envs, rep.Marquees, rep.Envs)
		}
		if err != nil {
			return fmt.Errorf("restore: %w; remove %s's store files before trying again", err, v.data)
		}
		fmt.Fprintf(stdout, "restored %d marquees and %d environments, counted in the restored store (store format %d, backup taken %s by warden %s) into %s\n"+
			"warden serve --data %s reconciles every attempt that was in flight when the backup was taken, as after a crash\n",
			marquees, envs, man.Format, man.TakenAt.Format(time.RFC3339), man.TakenBy, v.data, v.data)
		return nil
	}
}

// countRestored counts the marquees and environments a restored store
// holds, read from it.
func countRestored(dir string) (marquees, envs int, err error) {
	st, err := persistence.OpenReadOnly(dir, nil)
	if err != nil {
		return 0, 0, err
	}
	defer st.Close()
	for _, c := range []struct {
		prefix string
		n      *int
	}{{persistence.MarqueePrefix, &marquees}, {persistence.EnvPrefix, &envs}} {
		if err := st.Scan([]byte(c.prefix), nil, func(_, _ []byte) (bool, error) { *c.n++; return true, nil }); err != nil {
			return 0, 0, err
		}
	}
	return marquees, envs, nil
}

// newDataDir refuses a data directory that holds a store or anything but
// the keyrings and tokens a new one is given beforehand: restore and
// migrate write only into a new one.
func newDataDir(dir string) error {
	if err := emptyDir(dir); err != nil && !onlyKeys(dir) {
		return err
	}
	return nil
}

// keyFileSuffixes name the files a data directory is given before its
// store: keyrings, tokens, certificates, webhook secrets.
var keyFileSuffixes = []string{".key", ".token", ".crt", ".secrets"}

// onlyKeys reports a data directory holding nothing but keyrings and the
// token files a restore is told to bring along (and the lock of the
// command that wrote them).
func onlyKeys(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() != lockName && !slices.ContainsFunc(keyFileSuffixes, func(s string) bool { return strings.HasSuffix(e.Name(), s) }) {
			return false
		}
	}
	return true
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

// copyTree copies every file of src into dst, each synced, then dst
// itself synced: a crash leaves either no store or a whole one beside
// the files Pebble would refuse to open without their manifest.
func copyTree(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			return fmt.Errorf("unexpected directory %s in the backup's store", e.Name())
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	d, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = writeNewFile(dst, in)
	return err
}

// etcdFlags reach an etcd cluster as a client: migrate and rekey.
type etcdFlags struct {
	cert, key, ca string
}

func (e *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&e.cert, "etcd-cert-file", "", "client certificate for etcd's mutual TLS")
	fs.StringVar(&e.key, "etcd-key-file", "", "its key")
	fs.StringVar(&e.ca, "etcd-ca-file", "", "the cluster CA")
}

func (e etcdFlags) dial(endpoints []string) (*clientv3.Client, error) {
	cc := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if e.cert != "" {
		tlsFiles := etcdembed.TLSFiles{CertFile: e.cert, KeyFile: e.key, CAFile: e.ca}
		var err error
		if cc.TLS, err = tlsFiles.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
	}
	return clientv3.New(cc)
}

// clusterServing names what shows a cluster is running on etcd: a node's
// member key or a shard's owner key, both held under a node's lease. It
// waits up to etcdAnswerWait for etcd to answer at all (members just
// started, make cluster-etcd, still elect a leader). A lease outlives its
// node by up to its TTL when the node could not revoke it (killed, or
// every member stopped at once and its quorum went first), and etcd gives
// every lease its whole TTL again when the members come back; so a key
// counts as a running node only once it has outlived its lease: a live
// node renews it, a stopped node's key goes.
func clusterServing(c *clientv3.Client) (string, error) {
	deadline := time.Now().Add(etcdAnswerWait)
	held, err := heldKeys(c)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		held, err = heldKeys(c)
	}
	if err != nil || len(held) == 0 {
		return "", err
	}
	lapse := time.Now().Add(longestLease(c, held) + leaseLapseMargin)
	for len(held) > 0 && time.Now().Before(lapse) {
		time.Sleep(250 * time.Millisecond)
		if held, err = heldKeys(c); err != nil {
			return "", err
		}
	}
	if len(held) == 0 {
		return "", nil
	}
	return held[0].key, nil
}

// etcdAnswerWait is how long a command that reaches etcd itself waits for
// a quorum to answer.
const etcdAnswerWait = 30 * time.Second

// leaseLapseMargin is what etcd takes past a lease's TTL to revoke it: its
// lessor looks for expired leases every 500 ms and revokes them through
// raft.
const leaseLapseMargin = 2 * time.Second

type heldKey struct {
	key   string
	lease int64
}

// heldKeys lists the member and shard owner keys, which exist only while
// a node holds them.
func heldKeys(c *clientv3.Client) ([]heldKey, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var held []heldKey
	for _, p := range []string{cluster.MemberKey(""), cluster.ShardPrefix} {
		r, err := c.Get(ctx, p, clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
		for _, kv := range r.Kvs {
			held = append(held, heldKey{string(kv.Key), kv.Lease})
		}
	}
	return held, nil
}

// longestLease is the longest TTL granted to the leases the keys are held
// under, at most a node's longest (--lease-ttl); a key under no lease, or
// a lease etcd no longer knows, costs no wait.
func longestLease(c *clientv3.Client, held []heldKey) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var longest time.Duration
	seen := map[int64]bool{}
	for _, h := range held {
		if h.lease == 0 || seen[h.lease] {
			continue
		}
		seen[h.lease] = true
		r, err := c.TimeToLive(ctx, clientv3.LeaseID(h.lease))
		if err != nil || r.GrantedTTL <= 0 {
			continue
		}
		longest = max(longest, time.Duration(r.GrantedTTL)*time.Second)
	}
	return min(longest, config.MaxLeaseTTL)
}

// endpoint is one side of a migration: pebble:DIR or etcd:URL,URL.
type endpoint struct {
	backend string
	dir     string
	urls    []string
	store   *persistence.Store
	close   func()
}

func parseEndpoint(s string) (endpoint, error) {
	kind, rest, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == backendPebble && rest != "":
		return endpoint{backend: kind, dir: rest}, nil
	case ok && kind == backendEtcd && rest != "":
		return endpoint{backend: kind, urls: strings.Split(rest, ",")}, nil
	}
	return endpoint{}, fmt.Errorf("%q: want pebble:DIR or etcd:URL[,URL...]", s)
}

func (e endpoint) String() string {
	if e.backend == backendPebble {
		return "pebble:" + e.dir
	}
	return "etcd:" + strings.Join(e.urls, ",")
}

// open opens one side for a migration, refusing a store that is serving
// (and, for the target, one that holds anything).
func (e *endpoint) open(ef etcdFlags, target bool) error {
	if e.backend == backendPebble {
		if target {
			if err := newDataDir(e.dir); err != nil {
				return fmt.Errorf("the target %s: %w", e, err)
			}
			if err := prepareDataDir(e.dir); err != nil {
				return err
			}
		}
		take := lockToRead // a source is only read
		if target {
			take = lockDataDir
		}
		lock, err := take(e.dir)
		if err != nil {
			return fmt.Errorf("%s: %w (stop the warden serving it first)", e, err)
		}
		unlock := func() {
			if lock != nil {
				lock.Close()
			}
		}
		var st *persistence.Store
		if target {
			st, err = persistence.Open(e.dir, persistence.Options{})
		} else {
			st, err = persistence.OpenReadOnly(e.dir, nil)
		}
		if err != nil {
			unlock()
			return err
		}
		e.store, e.close = st, func() { st.Close(); unlock() }
		return nil
	}
	st, done, err := openClusterStore(e.urls, ef)
	if err != nil {
		return err
	}
	e.store, e.close = st, done
	return nil
}

// digest is a hash over every key and value of a store, in key order: two
// stores with one digest hold the same records.
func digest(st *persistence.Store) (string, int, error) {
	h := sha256.New()
	n := 0
	err := st.Scan(nil, nil, func(k, v []byte) (bool, error) {
		if persistence.Internal(k) {
			return true, nil
		}
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(v))
		h.Write(v)
		n++
		return true, nil
	})
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// migrateCmd is `warden migrate --from A --to B` (D7).
func migrateCommand(fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) func(args []string) error {
	fromFlag := fs.String("from", "", "source: pebble:DIR or etcd:URL[,URL...] (not serving)")
	toFlag := fs.String("to", "", "target: pebble:DIR or etcd:URL[,URL...] (empty)")
	var v verifyFlags
	v.register(fs, getenv)
	var ef etcdFlags
	ef.register(fs)
	return func(args []string) error {
		from, err := parseEndpoint(*fromFlag)
		if err != nil {
			return usageError("--from %v", err)
		}
		to, err := parseEndpoint(*toFlag)
		if err != nil {
			return usageError("--to %v", err)
		}
		sealer, _, err := sealerFor(keyPath(v.keyFile, v.data, sealKeyName))
		if err != nil {
			return err
		}
		if err := from.open(ef, false); err != nil {
			return err
		}
		defer from.close()
		// The source is verified before the target is touched: a refused
		// migration writes nothing anywhere.
		o := v.options(sealer)
		srcRep, err := actors.Verify(from.store, o)
		if err != nil {
			return err
		}
		if !srcRep.OK() {
			return statusError{exitProblems, fmt.Errorf("the source %s does not verify; nothing was copied:\n%s", from, srcRep.Text())}
		}
		if err := to.open(ef, true); err != nil {
			return err
		}
		defer to.close()
		if empty, err := to.store.Empty(); err != nil || !empty {
			if err == nil {
				err = errors.New("it holds records")
			}
			return fmt.Errorf("refusing the target %s: %w (migrate only into an empty store)", to, err)
		}
		start := time.Now()
		n, err := persistence.CopyAll(from.store, to.store)
		if err != nil {
			return fmt.Errorf("migrate: %w (the target is partly written: empty it and run again)", err)
		}
		dstRep, err := actors.Verify(to.store, o)
		if err != nil {
			return err
		}
		srcSum, srcN, err1 := digest(from.store)
		dstSum, dstN, err2 := digest(to.store)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		if !dstRep.OK() || srcSum != dstSum {
			return statusError{exitProblems, fmt.Errorf("the target %s does not match its source (%d records, digest %s; source %d, %s):\n%s", to, dstN, dstSum[:12], srcN, srcSum[:12], dstRep.Text())}
		}
		fmt.Fprintf(stdout, "migrated %d records (%d marquees, %d environments, %d pools) from %s to %s in %s; both verify, digest %s\n",
			n, dstRep.Marquees, dstRep.Envs, dstRep.Pools, from, to, time.Since(start).Round(time.Millisecond), dstSum[:16])
		if to.backend == backendPebble {
			fmt.Fprintf(stdout, "copy the keyrings (seal.key, callback-signing.key) into %s, or pass --seal-key-file to warden serve\n", to.dir)
		}
		return nil
	}
}
