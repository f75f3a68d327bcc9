// Package etcdembed runs an etcd member inside a warden process, the way
// k3s embeds it, so that three warden binaries are a highly available
// cluster with nothing else to run (C10). Tests use it for a real etcd on
// loopback.
package etcdembed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
)

// Config of one embedded member.
type Config struct {
	Name string
	// Dir holds the member's data (WAL and snapshots); a restart with the
	// same Dir rejoins as the same member.
	Dir       string
	PeerURL   string // e.g. http://127.0.0.1:2380
	ClientURL string // e.g. http://127.0.0.1:2379
	// InitialCluster is "n1=peerURL,n2=peerURL,..." (every founding member).
	InitialCluster string
	// Join: the member was added to a running cluster (etcd's
	// initial-cluster-state=existing) instead of founding it.
	Join bool
	// StartTimeout bounds the wait for the member to join a quorum.
	StartTimeout time.Duration
	// CompactionRetention is how much of etcd's history is kept: older
	// revisions are compacted away (etcd's periodic auto-compaction, run
	// every tenth of it); zero means an hour. warden serve's default is
	// ten minutes: every callback rewrites its marquee's record, and an
	// hour of revisions at a few hundred callbacks a second is a large
	// share of etcd's 2 GiB quota (BENCHMARKS.md, D10).
	CompactionRetention time.Duration
	// QuotaBytes is the member's space quota (etcd's
	// --quota-backend-bytes); zero is etcd's default, 2 GiB.
	QuotaBytes int64
	// TLS, when set, makes the member serve its clients and peers over
	// mutual TLS: only a certificate signed by the cluster CA gets in.
	// Its URLs are then https.
	TLS *TLSFiles
}

// TLSFiles are a node's certificate and key and the cluster CA
// (`warden keygen DIR --node NAME` writes them).
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// info is etcd's form of them: the same certificate serves and, to its
// peers, identifies; a client or peer without one the CA signed is
// refused.
func (t TLSFiles) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCertFile: t.CertFile, ClientKeyFile: t.KeyFile,
		TrustedCAFile: t.CAFile, ClientCertAuth: true}
}

// ClientConfig is the TLS of a client of such a member: it shows its
// certificate and trusts only the cluster CA.
func (t TLSFiles) ClientConfig() (*tls.Config, error) {
	return transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile}.ClientConfig()
}

// Member is a running embedded etcd member.
type Member struct {
	e *embed.Etcd
}

// Heartbeat and election timeouts: loopback and LAN round trips are well
// under a millisecond, so a 50 ms heartbeat and a 500 ms election (etcd's
// rule of thumb: ten heartbeats) find a dead leader in half a second rather
// than etcd's default second, which is what failover waits for.
const (
	tickMs     = 50
	electionMs = 500
)

// Start starts the member and waits until it serves (it has joined a
// quorum).
func Start(c Config) (*Member, error) {
	if c.Name == "" || c.Dir == "" {
		return nil, errors.New("etcd member: a name and a data directory are needed")
	}
	peer, err := url.Parse(c.PeerURL)
	if err != nil || peer.Host == "" {
		return nil, fmt.Errorf("etcd member: peer URL %q is not a URL", c.PeerURL)
	}
	client, err := url.Parse(c.ClientURL)
	if err != nil || client.Host == "" {
		return nil, fmt.Errorf("etcd member: client URL %q is not a URL", c.ClientURL)
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd member: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	cfg.TickMs, cfg.ElectionMs = tickMs, electionMs
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.InitialCluster = c.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = c.Name + "=" + c.PeerURL
	}
	cfg.InitialClusterToken = "warden"
	cfg.ClusterState = embed.ClusterStateFlagNew
	if c.Join {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	// etcd's own log goes to a file beside its data: warden's log stays
	// warden's, and an operator debugging the member still has it.
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(c.Dir, "etcd.log")}
	// Old revisions are compacted (hourly by default); the fencing compare
	// needs only the shard key's current revision.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"
	if c.CompactionRetention > 0 {
		cfg.AutoCompactionRetention = c.CompactionRetention.String()
	}
	cfg.QuotaBackendBytes = c.QuotaBytes
	if c.TLS != nil {
		cfg.ClientTLSInfo, cfg.PeerTLSInfo = c.TLS.info(), c.TLS.info()
	} else if peer.Scheme == "https" || client.Scheme == "https" {
		return nil, errors.New("etcd member: https URLs need its certificate (TLS)")
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd member %s: %w", c.Name, err)
	}
	timeout := c.StartTimeout
	if timeout == 0 {
		timeout = time.Minute
	}
	select {
	case <-e.Server.ReadyNotify():
		return &Member{e: e}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd member %s: %w", c.Name, err)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd member %s: no quorum within %s (are the other members of %s running?)", c.Name, timeout, c.InitialCluster)
	}
}

// Close stops the member and waits until etcd has closed its listeners
// (a member started again in this process binds the same URLs).
func (m *Member) Close() {
	m.stop()
	m.e.Close()
}

// Stop stops the member of a process that exits next: it waits for
// etcd's listeners at most listenersCloseBound, since etcd waits up to a
// second for peer connections to go idle and the peers stopping beside it
// (make cluster's Ctrl-C stops every member at once) keep theirs open
// meanwhile; the process's exit closes them.
func (m *Member) Stop() {
	m.stop()
	closed := make(chan struct{})
	go func() { m.e.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(listenersCloseBound):
	}
}

// stop ends the member's raft, WAL and backend. A leader first hands its
// leadership to another member, within leaderTransferBound, so that a
// rolling restart costs no election; then it stops without etcd's own
// transfer, which waits up to its request timeout (about 6 s) for a
// transferee that may be stopping too.
func (m *Member) stop() {
	s := m.e.Server
	if s.Leader() == s.MemberID() {
		ctx, cancel := context.WithTimeout(context.Background(), leaderTransferBound)
		for _, peer := range s.Cluster().Members() {
			if peer.ID == s.MemberID() || peer.IsLearner || ctx.Err() != nil {
				continue
			}
			if s.MoveLeader(ctx, uint64(s.MemberID()), uint64(peer.ID)) == nil {
				break
			}
		}
		cancel()
	}
	s.HardStop()
}

// leaderTransferBound bounds a stopping leader's hand-over: an election
// takes about electionMs, so a transfer that takes longer buys nothing.
const leaderTransferBound = electionMs * time.Millisecond

// listenersCloseBound is how long Close waits for etcd to close its
// listeners once the member has stopped.
const listenersCloseBound = 300 * time.Millisecond

// Client is a client of this member that calls its server in process,
// not over gRPC on loopback: a node's store talks only to its own member,
// and the socket, HTTP/2 framing and protobuf coding both ways were a
// large part of what each of its transactions cost. The member answers
// as it answers a remote client (it forwards a proposal to the leader, a
// linearizable read asks the leader), so nothing the store relies on
// changes; only etcd's gRPC interceptors are skipped, whose refusals are
// for a learner's clients and a removed member's, and warden's members
// are voters that stop once removed. Close it before the member.
func (m *Member) Client() *clientv3.Client { return v3client.New(m.e.Server) }

// Err reports a member's fatal error.
func (m *Member) Err() <-chan error { return m.e.Err() }

// ParseInitialCluster checks "n1=URL,n2=URL" and returns the names in order.
func ParseInitialCluster(s string) ([]string, error) {
	var names []string
	for _, part := range strings.Split(s, ",") {
		name, u, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("initial cluster %q: %q is not name=URL", s, part)
		}
		if p, err := url.Parse(u); err != nil || p.Host == "" {
			return nil, fmt.Errorf("initial cluster %q: %q is not a URL", s, u)
		}
		names = append(names, name)
	}
	return names, nil
}
