package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors/trust"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// clusterParts is what a cluster node runs besides the single-node
// process: maybe an etcd member, a client, and the store over them.
type clusterParts struct {
	member *etcdembed.Member
	client *clientv3.Client
	store  *persistence.Store
}

// etcdRequestTimeout bounds one etcd request of the store: a transaction
// whose answer does not come in this time has an unknown outcome, the
// caller hears 503 and retries (deduplicated).
const etcdRequestTimeout = 5 * time.Second

// openCluster starts (or reaches) etcd and builds the node; its store is
// the etcd backend.
func openCluster(c config, sealer *trust.Sealer, log *slog.Logger) (*clusterParts, error) {
	p := &clusterParts{}
	endpoints := c.EtcdEndpoints
	if c.EtcdEmbed {
		if _, err := etcdembed.ParseInitialCluster(c.EtcdInitialCluster); err != nil {
			return nil, err
		}
		log.Info("starting the embedded etcd member; it waits for a quorum of --etcd-initial-cluster", "member", c.Node, "peer", c.EtcdPeerURL)
		m, err := etcdembed.Start(etcdembed.Config{Name: c.Node, Dir: filepath.Join(c.Data, "etcd"), PeerURL: c.EtcdPeerURL,
			ClientURL: c.EtcdClientURL, InitialCluster: c.EtcdInitialCluster, Join: c.EtcdJoin})
		if err != nil {
			return nil, err
		}
		p.member = m
		endpoints = []string{c.EtcdClientURL}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		p.close()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	p.client = cl
	p.store = persistence.OpenBackend(persistence.OpenEtcd(cl, etcdRequestTimeout), sealer, log)
	return p, nil
}

func (p *clusterParts) close() {
	if p.client != nil {
		_ = p.client.Close()
	}
	if p.member != nil {
		p.member.Close()
	}
}

// advertiseURL is where the other nodes reach this one.
func advertiseURL(c config) string {
	if c.AdvertiseURL != "" {
		return strings.TrimRight(c.AdvertiseURL, "/")
	}
	return "http://" + c.Listen
}

// keygen writes what the nodes of a cluster share into dir, each only if
// absent: the seal keyring, the callback signing keyring and the cluster
// token, all 0600. `make cluster` runs it once before starting the nodes.
func keygen(args []string, stdout io.Writer) error {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		return errors.New("usage: warden keygen DIR (writes seal.key, callback-signing.key and cluster.token where absent)")
	}
	dir := args[0]
	if err := prepareDataDir(dir); err != nil {
		return err
	}
	for _, k := range []struct{ name, what string }{{sealKeyName, "seal key"}, {signingKeyName, "callback signing key"}} {
		path := filepath.Join(dir, k.name)
		if _, created, err := trust.LoadOrCreateKeyring(path, keyringComment(k.what)); err != nil {
			return fmt.Errorf("%s: %w", k.what, err)
		} else if created {
			fmt.Fprintf(stdout, "%s written to %s\n", k.what, path)
		}
	}
	path := filepath.Join(dir, "cluster.token")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		if err := trust.WriteFileAtomic(path, []byte(hex.EncodeToString(b)+"\n")); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster token written to %s\n", path)
	} else if err != nil {
		return err
	}
	return nil
}
