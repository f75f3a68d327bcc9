package local

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/internal/driver"
)

// most counts what is in progress at once and keeps the highest count.
type most struct{ now, top atomic.Int64 }

func (m *most) begin() {
	n := m.now.Add(1)
	for top := m.top.Load(); n > top && !m.top.CompareAndSwap(top, n); top = m.top.Load() {
	}
}

func (m *most) end() { m.now.Add(-1) }

// TestS13TheLocalPlatformsHTTPCallsWaitForTheDriversShare: the platform's
// calls to Caddy's admin API, its smoke checks through Caddy's listener
// and the applications' health checks all dial through the drivers'
// share, so however many environments are observed at once, no more of
// them are in flight than the share allows. Requests in flight are
// counted where they are answered (each holds a connection until its
// answer is read), so the count cannot run ahead of the share.
func TestS13TheLocalPlatformsHTTPCallsWaitForTheDriversShare(t *testing.T) {
	const share = driver.DescriptorsPerProcess // the least a share can be
	var inFlight most
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.begin()
		defer inFlight.end()
		time.Sleep(100 * time.Millisecond)
		if strings.HasPrefix(r.URL.Path, "/id/") {
			http.NotFound(w, r) // no route for the branch: an observation, not an error
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	p := Platform{CaddyAdmin: srv.URL, CaddyServer: "previews", PreviewListen: srv.Listener.Addr().String(), PreviewDomain: "localhost",
		Migrations: t.TempDir(), Descriptors: driver.NewDescriptors(share)}
	caps, err := p.Drivers()
	require.NoError(t, err)
	routes, pod := caps[environment.Route], caps[environment.App].(*Podman)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const each = 3 * share
	var wg sync.WaitGroup
	for i := range each {
		for _, capability := range []string{"route", "smoke"} {
			wg.Go(func() {
				res, err := routes.Do(ctx, driver.CapabilityRequest{Capability: capability, Op: "observe", EnvID: "env-1", Branch: "b1", Generation: 1})
				if assert.NoError(t, err, "%s %d", capability, i) {
					assert.True(t, res.OK, res.Message)
				}
			})
		}
		wg.Go(func() {
			_, _, err := askHealth(ctx, pod.Client, srv.URL+"/healthz", "")
			assert.NoError(t, err, "health %d", i)
		})
	}
	wg.Wait()
	t.Logf("%d calls, at most %d in flight at once, the share %d descriptors", 3*each, inFlight.top.Load(), share)
	require.LessOrEqual(t, inFlight.top.Load(), int64(share), "the platform's HTTP calls held more connections than the drivers' share")
}

// TestS13ADatabaseCallTakesItsConnectionsTogether: a database call takes
// the descriptors of both connections it may open (the admin one and the
// preview's database, for its migrations) before it opens either. Taken
// one connection at a time, calls holding their first while waiting for
// their second would hold the whole share and wait for ever; taken
// together, three calls of the least share run at once and every call
// ends. Connections are counted where a stand-in server accepts them,
// which never answers: each call's connection is held until its context
// ends.
func TestS13ADatabaseCallTakesItsConnectionsTogether(t *testing.T) {
	share := driver.NewDescriptors(driver.DescriptorsPerProcess)

	t.Run("migrations observed at once all end", func(t *testing.T) {
		fresh(t, "env-s13")
		setup := &Data{Admin: adminDSN, Migrations: migrations}
		require.True(t, do(t, setup, "database", "apply", "env-s13").OK)
		require.True(t, do(t, setup, "migrations", "apply", "env-s13").OK)
		d := &Data{Admin: adminDSN, Migrations: migrations, Descriptors: share}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for i := range 4 * driver.DescriptorsPerProcess {
			wg.Go(func() {
				res, err := d.Do(ctx, driver.CapabilityRequest{Capability: "migrations", Op: "observe", EnvID: "env-s13", Identity: "db-env-s13", Generation: 1})
				if assert.NoError(t, err, "call %d", i) {
					assert.True(t, res.OK && res.Observation.Matches, "call %d: %+v", i, res)
				}
			})
		}
		wg.Wait()
	})

	t.Run("no more connections than the share", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		var open most
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				open.begin()
				go func() {
					defer open.end()
					defer c.Close()
					_, _ = io.Copy(io.Discard, c) // until the caller gives up and closes
				}()
			}
		}()
		d := &Data{Admin: "postgres://nobody@" + ln.Addr().String() + "/postgres?sslmode=disable&connect_timeout=30", Descriptors: share}
		const calls = 4 * driver.DescriptorsPerProcess
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				_, err := d.Do(ctx, driver.CapabilityRequest{Capability: "database", Op: "observe", EnvID: "env-x", Identity: "db-env-x", Generation: 1})
				assert.Error(t, err, "nothing answers there")
			})
		}
		wg.Wait()
		// Three calls at once, each with one connection open (nothing
		// answers, so none opens its second). A connection whose caller
		// gave up may still count here while the next call's is accepted:
		// six at most, within the share.
		t.Logf("%d calls, at most %d connections open at once, the share %d descriptors", calls, open.top.Load(), driver.DescriptorsPerProcess)
		require.LessOrEqual(t, open.top.Load(), int64(driver.DescriptorsPerProcess), "database calls held more connections than the drivers' share")
	})
}
