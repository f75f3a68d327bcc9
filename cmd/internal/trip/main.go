// Command trip counts a callback's trip: run as a coverage build (its test
// builds it so), it starts warden's system and HTTP API in this process on
// loopback, walks a marquee to a dispatched generation, sends one callback
// to warm the path, clears the coverage counters, sends one durable
// callback (a delivery id, its dedup record, the history line, one synced
// batch, the answer) and writes the counters to the directory it is
// given. Which of the module's files ran code in that window is then read
// from the counters (TestACallbacksTripIsCountedAndDoesNotGrow).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/coverage"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/clock"
	"github.com/wardenhq/warden/actors/marquee"
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

// dispatched accepts every dispatch: the workflow is not what is counted.
type dispatched struct{}

func (dispatched) Dispatch(context.Context, driver.DispatchRequest) (driver.Run, error) {
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
		Pools: map[string]int{"default": 1}, Dispatcher: dispatched{}, CallbackURL: url + "/v1/webhooks/terraform",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer sys.Stop(context.Background())
	srv := httpapi.NewHTTPServer("", httpapi.New(sys, httpapi.Options{CallbackToken: callbackToken, OperatorToken: operatorToken}))
	go func() { _ = httpapi.Serve(srv, ln) }()
	defer srv.Close()

	c := client{url: url}
	if _, err := c.post("/v1/marquees", operatorToken, map[string]any{"id": "trip-1", "kind": "tutorial"}, ""); err != nil {
		return err
	}
	gen, err := c.dispatched("trip-1")
	if err != nil {
		return err
	}
	step := func(name, delivery string) error {
		v, err := c.post("/v1/webhooks/terraform", callbackToken,
			map[string]any{"marquee_id": "trip-1", "verb": "step", "generation": gen, "step": name}, delivery)
		if err == nil && v["result"] != "applied" {
			err = fmt.Errorf("callback answered %v, not applied", v)
		}
		return err
	}
	if err := step("vm_starting", "trip-warm"); err != nil {
		return err
	}
	if err := coverage.ClearCounters(); err != nil {
		return err
	}
	if err := step("ssh_configuring", "trip-counted"); err != nil {
		return err
	}
	if err := coverage.WriteCountersDir(countersDir); err != nil {
		return err
	}
	return coverage.WriteMetaDir(countersDir)
}

type client struct{ url string }

func (c client) post(path, token string, body any, delivery string) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, c.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if delivery != "" {
		req.Header.Set("Webhook-Id", delivery)
	}
	return c.do(req)
}

func (c client) do(req *http.Request) (map[string]any, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil || resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s answered %d: %s", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	return v, nil
}

// dispatched waits until the marquee's dispatch is recorded: the
// generation a callback must carry.
func (c client) dispatched(id string) (float64, error) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodGet, c.url+"/v1/marquees/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		v, err := c.do(req)
		if err != nil {
			return 0, err
		}
		if g, _ := v["generation"].(float64); g > 0 {
			return g, nil
		}
	}
	return 0, errors.New(id + " was not dispatched in 30 s")
}
