package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	fs2 "io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// clusterParts is what a cluster node runs besides the single-node
// process: maybe an etcd member, a client, and the store over them.
type clusterParts struct {
	member *etcdembed.Member
	client *clientv3.Client
	// inProcess is the embedded member's in-process client
	// (etcdembed.Member.Client), the store's when there is a member; the
	// cluster's leases and watches keep client.
	inProcess *clientv3.Client
	store     *persistence.Store
}

// etcdRequestTimeout bounds one etcd request of the store: a transaction
// whose answer does not come in this time has an unknown outcome, the
// caller hears 503 and retries (deduplicated).
const etcdRequestTimeout = 5 * time.Second

// openCluster starts (or reaches) etcd and builds the node; its store is
// the etcd backend.
func openCluster(c config.Serve, log *slog.Logger) (*clusterParts, error) {
	p := &clusterParts{}
	endpoints := c.EtcdEndpoints
	if c.EtcdEmbed {
		m, err := startMember(c, log)
		if err != nil {
			return nil, err
		}
		p.member = m
		endpoints = []string{c.EtcdClientURL}
	}
	cl, err := etcdFlags{cert: c.EtcdCert, key: c.EtcdKey, ca: c.EtcdCA}.dial(endpoints)
	if err != nil {
		p.close()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	p.client = cl
	storeClient := cl
	if p.member != nil {
		p.inProcess = p.member.Client()
		storeClient = p.inProcess
	}
	p.store = persistence.OpenBackend(persistence.OpenEtcd(storeClient, etcdRequestTimeout), log)
	return p, nil
}

// startMember starts the node's embedded etcd member and waits for its
// quorum.
func startMember(c config.Serve, log *slog.Logger) (*etcdembed.Member, error) {
	if _, err := etcdembed.ParseInitialCluster(c.EtcdInitialCluster); err != nil {
		return nil, err
	}
	var tlsFiles *etcdembed.TLSFiles
	if c.EtcdCert != "" {
		tlsFiles = &etcdembed.TLSFiles{CertFile: c.EtcdCert, KeyFile: c.EtcdKey, CAFile: c.EtcdCA}
	}
	log.Info("starting the embedded etcd member; it waits for a quorum of --etcd-initial-cluster", "member", c.Node, "peer", c.EtcdPeerURL, "tls", tlsFiles != nil)
	return etcdembed.Start(etcdembed.Config{Name: c.Node, Dir: filepath.Join(c.Data, "etcd"), PeerURL: c.EtcdPeerURL,
		ClientURL: c.EtcdClientURL, InitialCluster: c.EtcdInitialCluster, Join: c.EtcdJoin, TLS: tlsFiles,
		CompactionRetention: c.EtcdCompaction, QuotaBytes: int64(c.EtcdQuota)})
}

// serveEtcdOnly runs the node's embedded etcd member and nothing else
// (--etcd-only) until SIGINT or SIGTERM: the members of a cluster whose
// nodes are stopped, for migrate to copy a store into or out of, or an
// offline rekey. The data directory is locked as a node's is, so the node
// cannot start on it meanwhile.
func serveEtcdOnly(c config.Serve, log *slog.Logger) error {
	lock, err := takeDataDir(c.Data)
	if err != nil {
		return err
	}
	defer lock.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	m, err := startMember(c, log)
	if err != nil {
		return err
	}
	defer m.Stop()
	log.Info("etcd member serving alone (--etcd-only): no warden node runs here; stop it before starting the node", "member", c.Node, "client", c.EtcdClientURL)
	select {
	case s := <-sig:
		log.Info("etcd member stopping", "signal", s.String())
	case err := <-m.Err():
		return fmt.Errorf("etcd member: %w", err)
	}
	return nil
}

func (p *clusterParts) close() {
	if p.inProcess != nil {
		_ = p.inProcess.Close()
	}
	if p.client != nil {
		_ = p.client.Close()
	}
	if p.member != nil {
		p.member.Stop() // the process exits next
	}
}

// advertiseURL is where the other nodes reach this one.
func advertiseURL(c config.Serve) string {
	if c.AdvertiseURL != "" {
		return strings.TrimRight(c.AdvertiseURL, "/")
	}
	return "http://" + c.Listen
}

// keygenUsage is keygen's one line of usage.
const keygenUsage = "warden keygen DIR [--node NAME [--host ADDR,...]] [--client NAME] [--rotate] (writes seal.key, callback-signing.key, cluster.token and the cluster CA where absent)"

// keygenCommand is `warden keygen`: the keys, the token and the
// certificates a node or a client needs, each written where absent.
// Long: its flags and the files they select, read as one.
func keygenCommand(fs *flag.FlagSet, stdout io.Writer) func([]string) error {
	node := fs.String("node", "", "also write this node's certificate (NAME.crt, NAME.key)")
	hosts := fs.String("host", "127.0.0.1,localhost", "the node's IP addresses and DNS names, comma-separated (its certificate's names)")
	client := fs.String("client", "", "also write a client certificate NAME.crt, NAME.key, for the commands that reach a cluster's etcd themselves (migrate, rekey --etcd-endpoints)")
	rotate := fs.Bool("rotate", false, "replace the node's (or client's) certificate and key (restart that node afterwards)")
	return func(args []string) error {
		if len(args) != 1 {
			return usageError("usage: %s", keygenUsage)
		}
		dir := args[0]
		if *node != "" && !config.ValidNodeName(*node) {
			return usageError("--node: 1..32 of a-z, 0-9 and -")
		}
		if *client != "" && (!config.ValidNodeName(*client) || *client == *node) {
			return usageError("--client: 1..32 of a-z, 0-9 and -, not the node's name")
		}
		if err := prepareDataDir(dir); err != nil {
			return err
		}
		// A directory a warden serves from is not written under it: a refused
		// keygen changes nothing.
		lock, err := lockDataDir(dir)
		if err != nil {
			return fmt.Errorf("%w; nothing was written", err)
		}
		defer lock.Close()
		for _, k := range []struct{ name, what string }{{sealKeyName, "seal key"}, {signingKeyName, "callback signing key"}} {
			path := filepath.Join(dir, k.name)
			if _, created, err := trust.LoadOrCreateKeyring(path, keyringComment(k.what)); err != nil {
				return fmt.Errorf("%s: %w", k.what, err)
			} else if created {
				fmt.Fprintf(stdout, "%s written to %s\n", k.what, path)
			}
		}
		path := filepath.Join(dir, "cluster.token")
		if _, err := os.Stat(path); errors.Is(err, fs2.ErrNotExist) {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			if err := trust.WriteFileAtomic(path, []byte(hex.EncodeToString(b)+"\n")); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "cluster token written to %s\n", path)
		} else if err != nil {
			return err
		}
		if created, err := ensureCA(dir); err != nil {
			return fmt.Errorf("cluster CA: %w", err)
		} else if created {
			fmt.Fprintf(stdout, "cluster CA written to %s\n", filepath.Join(dir, caName))
		}
		if *client != "" {
			written, err := issueCert(dir, *client, nil, clientUsage, *rotate)
			if err != nil {
				return fmt.Errorf("client certificate of %s: %w", *client, err)
			}
			if written {
				fmt.Fprintf(stdout, "client certificate of %s written to %s (for migrate and rekey --etcd-endpoints: --etcd-cert-file)\n", *client, filepath.Join(dir, *client+".crt"))
			}
		}
		if *node == "" {
			return nil
		}
		written, err := issueCert(dir, *node, hostsOf(*hosts), nodeUsage, *rotate)
		if err != nil {
			return fmt.Errorf("certificate of %s: %w", *node, err)
		}
		if written {
			fmt.Fprintf(stdout, "certificate of %s (%s) written to %s\n", *node, *hosts, filepath.Join(dir, *node+".crt"))
		}
		return nil
	}
}
