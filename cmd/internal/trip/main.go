// Command trip counts a callback's trip: run as a coverage build (its test
// builds it so), it starts warden's system and HTTP API in this process on
// loopback, walks a marquee to a dispatched generation, sends one callback
// to warm the path, then three times clears the coverage counters, sends
// one durable callback (a delivery id, its dedup record, the history line,
// one synced batch, the answer) and writes the counters to a directory of
// its own under the one it is given. Which of the module's files ran code
// in each window is then read from the counters
// (TestACallbacksTripIsCountedAndDoesNotGrow).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/coverage"
	"strconv"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/internal/testkit"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/persistence"
)

const (
	callbackToken = "trip-callback-token"
	operatorToken = "trip-operator-token"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: trip STORE-DIR COUNTERS-DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "trip:", err)
		os.Exit(1)
	}
}

// acceptAll accepts every dispatch: the workflow is not what is counted.
type acceptAll struct{}

func (acceptAll) Dispatch(context.Context, driver.DispatchRequest) (driver.Run, error) {
	return driver.Run{ID: 1}, nil
}

func run(storeDir, countersDir string) error {
	store, err := persistence.Open(storeDir, persistence.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	sys, err := actors.Start(actors.Config{Store: store, Clock: clock.Real{}, Machine: marquee.Machine{Config: marquee.DefaultConfig()},
		Pools: map[string]int{"default": 1}, Dispatcher: acceptAll{}, CallbackURL: url + "/v1/webhooks/terraform",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer sys.Stop(context.Background())
	srv := httpapi.NewHTTPServer("", httpapi.New(sys, httpapi.Options{CallbackToken: callbackToken, OperatorToken: operatorToken}))
	go func() { _ = httpapi.Serve(srv, ln) }()
	defer srv.Close()

	if _, err := call(url, http.MethodPost, "/v1/marquees", operatorToken, map[string]any{"id": "trip-1", "kind": "tutorial"}, ""); err != nil {
		return err
	}
	gen, err := dispatched(url, "trip-1")
	if err != nil {
		return err
	}
	// The callbacks go on a connection of their own, as a workflow's do: a
	// connection whose first request is an operator's stays with net/http,
	// and the trip counted would be one no callback takes.
	callbacks := &http.Client{Transport: &http.Transport{}}
	step := func(name, delivery string) error {
		v, err := callOn(callbacks, url, http.MethodPost, "/v1/webhooks/terraform", callbackToken,
			map[string]any{"marquee_id": "trip-1", "verb": "step", "generation": gen, "step": name}, delivery)
		if err == nil && v["result"] != "applied" {
			err = fmt.Errorf("callback answered %v, not applied", v)
		}
		return err
	}
	if err := step("vm_starting", "trip-warm"); err != nil {
		return err
	}
	// Three callbacks, each counted alone in a directory of its own: the
	// trip is what every one of them ran (a timer of the process that
	// fired in one window is not the callback's).
	for i, name := range []string{"ssh_configuring", "tls_provisioning", "app_deploying"} {
		dir := filepath.Join(countersDir, strconv.Itoa(i+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		if err := coverage.ClearCounters(); err != nil {
			return err
		}
		if err := step(name, "trip-counted-"+name); err != nil {
			return err
		}
		if err := coverage.WriteCountersDir(dir); err != nil {
			return err
		}
		if err := coverage.WriteMetaDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// call is testkit.Do with an answer other than 2xx an error.
func call(base, method, path, token string, body any, delivery string) (map[string]any, error) {
	return callOn(http.DefaultClient, base, method, path, token, body, delivery)
}

func callOn(c *http.Client, base, method, path, token string, body any, delivery string) (map[string]any, error) {
	st, v, err := testkit.Do(c, base, method, path, token, body, delivery)
	if err == nil && st >= 300 {
		err = fmt.Errorf("%s %s answered %d: %v", method, path, st, v)
	}
	return v, err
}

// dispatched waits until the marquee's dispatch is recorded: the
// generation a callback must carry.
func dispatched(base, id string) (float64, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		v, err := call(base, http.MethodGet, "/v1/marquees/"+id, operatorToken, nil, "")
		if err != nil {
			return 0, err
		}
		if g, _ := v["generation"].(float64); g > 0 {
			return g, nil
		}
	}
	return 0, errors.New(id + " was not dispatched in 30 s")
}
