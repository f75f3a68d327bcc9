package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// etcdRestore restores a cluster's backup (an etcd snapshot) as etcd's own
// procedure does (etcdutl snapshot restore): once per member of the new
// cluster, each into that node's <data>/etcd, all with one initial
// cluster. Before that, the snapshot is restored once more into a
// throwaway single-member etcd on loopback and its records verified:
// a backup whose records do not verify is refused, as on one node.
type etcdRestore struct {
	node, peerURL, initialCluster string
}

func (e *etcdRestore) register(fs *flag.FlagSet) {
	fs.StringVar(&e.node, "node", "", "cluster backup: the member this data directory is for")
	fs.StringVar(&e.peerURL, "etcd-peer-url", "", "cluster backup: the member's peer URL")
	fs.StringVar(&e.initialCluster, "etcd-initial-cluster", "", "cluster backup: every member of the new cluster, name=peerURL,...")
}

func (e etcdRestore) restore(from string, v verifyFlags, sealer *trust.Sealer, stdout io.Writer) error {
	if e.node == "" || e.peerURL == "" || e.initialCluster == "" {
		return usageError("a cluster's backup is restored once per member: --node NAME --etcd-peer-url URL --etcd-initial-cluster n1=URL,... (the new cluster's)")
	}
	if _, err := etcdembed.ParseInitialCluster(e.initialCluster); err != nil {
		return usageError("--etcd-initial-cluster: %v", err)
	}
	snap := filepath.Join(from, etcdSnapshot)
	rep, err := verifySnapshot(snap, v.options(sealer))
	if err != nil {
		return fmt.Errorf("refusing the backup: %w", err)
	}
	if err := prepareDataDir(v.data); err != nil {
		return err
	}
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: snap, Name: e.node,
		OutputDataDir: filepath.Join(v.data, "etcd"), PeerURLs: []string{e.peerURL},
		InitialCluster: e.initialCluster, InitialClusterToken: "warden"})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored member %s of a new cluster (%d marquees, %d environments) into %s\n"+
		"restore every member the same way, then start each node with warden serve --etcd-embed and the same --etcd-initial-cluster; the first owner of each shard reconciles its attempts, as after a crash\n",
		e.node, rep.Marquees, rep.Envs, filepath.Join(v.data, "etcd"))
	return nil
}

// verifySnapshot restores snap into a scratch single-member etcd on free
// loopback ports and verifies the records it holds.
func verifySnapshot(snap string, o actors.VerifyOptions) (actors.VerifyReport, error) {
	scratch, err := os.MkdirTemp("", "warden-verify-snapshot-")
	if err != nil {
		return actors.VerifyReport{}, err
	}
	defer os.RemoveAll(scratch)
	ports, err := freePorts(2)
	if err != nil {
		return actors.VerifyReport{}, err
	}
	peer, client := "http://127.0.0.1:"+ports[0], "http://127.0.0.1:"+ports[1]
	dir := filepath.Join(scratch, "etcd")
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: snap, Name: "verify", OutputDataDir: dir,
		PeerURLs: []string{peer}, InitialCluster: "verify=" + peer, InitialClusterToken: "warden"})
	if err != nil {
		return actors.VerifyReport{}, fmt.Errorf("the snapshot does not restore: %w", err)
	}
	m, err := etcdembed.Start(etcdembed.Config{Name: "verify", Dir: dir, PeerURL: peer, ClientURL: client,
		InitialCluster: "verify=" + peer, StartTimeout: 30 * time.Second})
	if err != nil {
		return actors.VerifyReport{}, err
	}
	defer m.Close()
	c, err := etcdFlags{}.dial([]string{client})
	if err != nil {
		return actors.VerifyReport{}, err
	}
	defer c.Close()
	rep, err := actors.Verify(persistence.OpenBackend(persistence.OpenEtcd(c, etcdRequestTimeout), nil), o)
	if err != nil {
		return rep, err
	}
	if !rep.OK() {
		return rep, fmt.Errorf("its records do not verify:\n%s", rep.Text())
	}
	return rep, nil
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		_, port, _ := strings.Cut(l.Addr().String(), ":")
		out = append(out, port)
	}
	return out, nil
}
