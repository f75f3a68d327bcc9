package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/wardenhq/warden/internal/testports"
	"github.com/wardenhq/warden/persistence/etcdembed"
)

// TestEtcdLetsInOnlyTheClusterCAsCertificates: the embedded
// members serve clients and peers over mutual TLS with the certificates
// `warden keygen` makes. A client without a certificate gets nothing (nor
// does plain HTTP), a member with another CA's certificate cannot join,
// and a node whose certificate was rotated rejoins with the new one.
func TestEtcdLetsInOnlyTheClusterCAsCertificates(t *testing.T) {
	t.Parallel() // mostly waits on processes and timers: overlapped with the other long waits (make test)
	if testing.Short() {
		t.Skip("starts etcd members")
	}
	shared, rogue := filepath.Join(t.TempDir(), "shared"), filepath.Join(t.TempDir(), "rogue")
	for _, n := range []string{"n1", "n2"} {
		require.NoError(t, keygen([]string{shared, "--node", n, "--host", "127.0.0.1"}, io.Discard))
	}
	require.NoError(t, keygen([]string{rogue, "--node", "n3", "--host", "127.0.0.1"}, io.Discard))
	files := func(dir, n string) *etcdembed.TLSFiles {
		return &etcdembed.TLSFiles{CertFile: filepath.Join(dir, n+".crt"), KeyFile: filepath.Join(dir, n+".key"), CAFile: filepath.Join(dir, caName)}
	}
	type member struct{ name, peer, client string }
	var ms []member
	var initial []string
	for _, n := range []string{"n1", "n2", "n3"} {
		var peer, client string
		require.NoError(t, testports.StablePorts(&peer, &client))
		ms = append(ms, member{n, "https://" + peer, "https://" + client})
		initial = append(initial, n+"="+"https://"+peer)
	}
	data := t.TempDir()
	start := func(m member, tlsFiles *etcdembed.TLSFiles, timeout time.Duration) (*etcdembed.Member, error) {
		return etcdembed.Start(etcdembed.Config{Name: m.name, Dir: filepath.Join(data, m.name), PeerURL: m.peer, ClientURL: m.client,
			InitialCluster: strings.Join(initial, ","), TLS: tlsFiles, StartTimeout: timeout})
	}
	type started struct {
		m   *etcdembed.Member
		err error
	}
	results := make([]chan started, 3)
	for i, m := range ms {
		results[i] = make(chan started, 1)
		dir, timeout := shared, 20*time.Second
		if m.name == "n3" {
			dir, timeout = rogue, 6*time.Second // signed by another CA: it will never join
		}
		go func() {
			mm, err := start(m, files(dir, m.name), timeout)
			results[i] <- started{mm, err}
		}()
	}
	n1, n2, n3 := <-results[0], <-results[1], <-results[2]
	require.NoError(t, n1.err)
	require.NoError(t, n2.err)
	defer n2.m.Close()
	require.Error(t, n3.err, "a member with another CA's certificate cannot join")

	client := func(cfg *tls.Config) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{ms[0].client}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	try := func(c *clientv3.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := c.Put(ctx, "warden/probe", "x")
		return err
	}
	good, err := files(shared, "n1").ClientConfig()
	require.NoError(t, err)
	require.NoError(t, try(client(good)), "the cluster's own certificate is let in")

	roots := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(shared, caName))
	require.NoError(t, err)
	roots.AppendCertsFromPEM(ca)
	require.Error(t, try(client(&tls.Config{RootCAs: roots})), "a client without a certificate gets nothing")
	foreign, err := files(rogue, "n3").ClientConfig()
	require.NoError(t, err)
	foreign.RootCAs = roots
	require.Error(t, try(client(foreign)), "nor one with another CA's")
	plain := &http.Client{Timeout: 2 * time.Second}
	resp, err := plain.Post("http"+strings.TrimPrefix(ms[0].client, "https")+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"d2FyZGVuLw=="}`))
	if err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode, "nor plain HTTP")
	}

	// Rotation: n1 gets a new certificate and restarts with it.
	old, err := os.ReadFile(filepath.Join(shared, "n1.crt"))
	require.NoError(t, err)
	require.NoError(t, keygen([]string{shared, "--node", "n1", "--host", "127.0.0.1", "--rotate"}, io.Discard))
	rotated, err := os.ReadFile(filepath.Join(shared, "n1.crt"))
	require.NoError(t, err)
	require.NotEqual(t, old, rotated)
	n1.m.Close()
	again, err := start(ms[0], files(shared, "n1"), 20*time.Second)
	require.NoError(t, err, "the rotated certificate rejoins")
	defer again.Close()
	fresh, err := files(shared, "n1").ClientConfig()
	require.NoError(t, err)
	require.NoError(t, try(client(fresh)))
}

// TestAClusterBeyondLoopbackNeedsEtcdTLS: the configuration is
// refused without it, and needs https URLs with it; an embedded member on
// loopback without TLS is refused unless --etcd-plaintext asks for it (D14).
func TestAClusterBeyondLoopbackNeedsEtcdTLS(t *testing.T) {
	env := map[string]string{"WARDEN_OPERATOR_TOKEN": "b", "WARDEN_CLUSTER_TOKEN": "c", "WARDEN_DISPATCH": "exec", "WARDEN_DISPATCH_COMMAND": "echo hi"}
	getenv := func(k string) string { return env[k] }
	base := []string{"--node", "n1", "--seal-key-file", "s", "--callback-signing-key-file", "k", "--etcd-embed"}
	far := append(append([]string(nil), base...), "--etcd-peer-url", "http://10.0.0.5:2380", "--etcd-client-url", "http://10.0.0.5:2379",
		"--etcd-initial-cluster", "n1=http://10.0.0.5:2380,n2=http://10.0.0.6:2380")
	_, err := parseConfig(far, getenv, io.Discard)
	require.ErrorContains(t, err, "needs etcd's mutual TLS")
	require.Equal(t, exitConfig, exitStatusOf(err))
	withTLS := append(append([]string(nil), far...), "--etcd-cert-file", "c", "--etcd-key-file", "k", "--etcd-ca-file", "ca")
	_, err = parseConfig(withTLS, getenv, io.Discard)
	require.ErrorContains(t, err, "every etcd URL is https://")
	near := append(append([]string(nil), base...), "--etcd-peer-url", "http://127.0.0.1:2380", "--etcd-client-url", "http://127.0.0.1:2379",
		"--etcd-initial-cluster", "n1=http://127.0.0.1:2380")
	_, err = parseConfig(near, getenv, io.Discard)
	require.ErrorContains(t, err, "without TLS is for tests only (--etcd-plaintext)", "plain http on loopback only when asked for")
	_, err = parseConfig(append(near, "--etcd-plaintext"), getenv, io.Discard)
	require.NoError(t, err, "loopback without TLS under --etcd-plaintext (tests, one machine)")
}
