package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/persistence"
)

// warden backup and warden restore.

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
