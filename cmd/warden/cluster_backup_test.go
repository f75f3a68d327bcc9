package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/persistence"
)

// TestD4D5AClustersBackupRestoresIntoANewCluster: a node of a cluster
// with embedded etcd is backed up while it serves (etcd's snapshot
// through the maintenance API, D4); the backup is restored once per
// member of a new three-node cluster on other ports (D5: etcdutl's
// restore, after the snapshot's records were verified in a throwaway
// member), and the new cluster serves every marquee with its sealed
// connection.
func TestD4D5AClustersBackupRestoresIntoANewCluster(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	var kg strings.Builder
	require.NoError(t, keygen([]string{shared}, &kg))
	ok := okScript(t)
	nodeArgs := func(name, peer, client, initial string) []string {
		return []string{"--node", name, "--etcd-embed", "--etcd-plaintext", "--etcd-peer-url", "http://" + peer, "--etcd-client-url", "http://" + client,
			"--etcd-initial-cluster", initial, "--cluster-token-file", filepath.Join(shared, "cluster.token"),
			"--seal-key-file", filepath.Join(shared, sealKeyName), "--callback-signing-key-file", filepath.Join(shared, "callback-signing.key"),
			"--dispatch", "exec", "--dispatch-command", ok, "--bootstrap", "exec", "--bootstrap-command", ok, "--pool", "default=10"}
	}
	peer, client := freePort(t), freePort(t)
	old := startProc(t, filepath.Join(t.TempDir(), "old"), freePort(t), nodeArgs("n1", peer, client, "n1=http://"+peer)...)
	settle(t, old, 1)
	for i := range 5 {
		id := fmt.Sprintf("m-%d", i)
		createOn(t, old, map[string]any{"id": id, "kind": "tutorial"})
	}
	old.waitDispatched("m-0", 20*time.Second)
	deployUnderCurrentGeneration(t, old, "m-0", "cluster-key")

	backup := filepath.Join(t.TempDir(), "backup")
	code, msg := runCLI(t, "backup", "--to", backup, "--server", old.url)
	require.Equal(t, 0, code, msg)
	require.Contains(t, msg, fmt.Sprintf("(etcd, store format %d)", persistence.StoreFormat), "D4: a cluster's backup is etcd's snapshot")
	require.Contains(t, msg, "5 marquees")
	_, err := os.Stat(filepath.Join(backup, etcdSnapshot))
	require.NoError(t, err)
	require.NoError(t, old.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, old.cmd.Wait(), old.log.String())

	type member struct{ name, data, peer, client, http string }
	var ms []member
	var initial []string
	for i := 1; i <= 3; i++ {
		m := member{name: fmt.Sprint("n", i), data: filepath.Join(t.TempDir(), fmt.Sprint("n", i)), peer: freePort(t), client: freePort(t), http: freePort(t)}
		ms = append(ms, m)
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	for _, m := range ms {
		require.NoError(t, os.MkdirAll(m.data, 0o700))
		code, msg := runCLI(t, "restore", "--from", backup, "--data", m.data, "--seal-key-file", filepath.Join(shared, sealKeyName),
			"--node", m.name, "--etcd-peer-url", "http://"+m.peer, "--etcd-initial-cluster", strings.Join(initial, ","))
		require.Equal(t, 0, code, msg)
		require.Contains(t, msg, "restored member "+m.name+" of a new cluster (5 marquees")
	}
	procs := make([]*proc, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() { // the members wait for each other's quorum
			defer wg.Done()
			procs[i] = startProc(t, m.data, m.http, nodeArgs(m.name, m.peer, m.client, strings.Join(initial, ","))...)
		}()
	}
	wg.Wait()
	settle(t, procs[0], 3)
	for i := range 5 {
		st, v := retry503(procs[i%3], "GET", fmt.Sprintf("/v1/marquees/m-%d", i), nil)
		require.Equal(t, 200, st, "D5: the new cluster serves m-%d: %v", i, v)
	}
	_, m0 := retry503(procs[1], "GET", "/v1/marquees/m-0", nil)
	require.NotNil(t, m0["connection"], "the sealed connection opens with the shared keyring")
	code, msg = runCLI(t, "verify", "--live", "--server", procs[2].url)
	require.Equal(t, 0, code, msg)
}
