// Package pgcluster starts a throwaway PostgreSQL cluster from Debian's
// binaries: initdb and pg_ctl under a directory of the caller's, on a
// loopback port, trust authentication for one superuser. As root it runs
// PostgreSQL as the postgres user (initdb refuses root). The benchmark's
// baseline, the local preview platform (P2) and their tests use it.
package pgcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Cluster is a running throwaway cluster.
type Cluster struct {
	bin, dir, user string
	port           int
	cred           *syscall.Credential
	pid            int
}

// Find finds Debian's PostgreSQL binaries (the newest version installed),
// else initdb on the PATH.
func Find() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL is not installed (Debian: apt-get install -y postgresql)")
}

// Start initializes a cluster under dir (created; it must not hold one
// already unless it is this package's) with superuser name su, and starts
// it on a free loopback port with the extra server settings given
// ("name=value").
func Start(dir, su string, settings ...string) (*Cluster, error) {
	return StartOn(dir, su, 0, settings...)
}

// Initialized reports whether dir holds a cluster already (Start then
// skips initdb, the slow part of a first start).
func Initialized(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "PG_VERSION"))
	return err == nil
}

// StartOn is Start on a given loopback port (0: a free one), so that a
// cluster started again keeps its address: the connection strings given
// out before stay true.
func StartOn(dir, su string, port int, settings ...string) (*Cluster, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, user: su}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := c.runAsOwner(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("port %d: %w", port, err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if !Initialized(dir) {
		if err := c.run("initdb", "-D", dir, "-A", "trust", "-U", su, "-E", "UTF8"); err != nil {
			return nil, err
		}
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, dir)
	for _, s := range settings {
		opts += " -c " + s
	}
	if err := c.run("pg_ctl", "start", "-w", "-D", dir, "-l", filepath.Join(dir, "log"), "-o", opts); err != nil {
		return nil, err
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		c.pid, _ = strconv.Atoi(strings.SplitN(string(raw), "\n", 2)[0])
	}
	return c, nil
}

// runAsOwner makes the cluster's files the postgres user's when warden
// runs as root, and opens the directories above it to that user.
func (c *Cluster) runAsOwner() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return errors.New("running as root and there is no postgres user to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return err
	}
	// The directories above it that a test made under the temporary
	// directory become traversable (not readable) for that user; others
	// are left as they are, and a cluster under a directory the postgres
	// user cannot reach fails at initdb saying so.
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(c.dir); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o011 != 0o011 {
			_ = os.Chmod(d, st.Mode().Perm()|0o011)
		}
	}
	return nil
}

func (c *Cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	// A group of its own: a Ctrl-C meant for the caller's foreground
	// group does not stop the server under it; Stop does, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, out)
	}
	return nil
}

// DSN is the connection string for database db as the superuser.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", c.user, c.port, db)
}

// Port is the cluster's loopback port; PID its postmaster's.
func (c *Cluster) Port() int { return c.port }
func (c *Cluster) PID() int  { return c.pid }

// Stop stops the cluster (fast shutdown); its files stay.
func (c *Cluster) Stop() error { return c.run("pg_ctl", "stop", "-m", "fast", "-D", c.dir) }
