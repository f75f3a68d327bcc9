package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wardenhq/warden/cmd/internal/mdreport"
	"github.com/wardenhq/warden/httpapi"
)

// runLists measures the operator surfaces over a large store (O4, O7,
// O12): one page of the marquee list, filtered lists that must scan far
// or all of the store to fill a page, a console page (what each live
// update of an open page costs), and the metrics census. Real HTTP on
// loopback against the real system and Pebble store.
// Long: a measurement's script, read top to bottom as it runs.
func runLists(out string, n, requests int) error {
	dir, err := os.MkdirTemp("", "warden-lists")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	now := time.Now().UTC()
	if err := populate(dir, n, now); err != nil {
		return err
	}
	sys, st, err := startSystem(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	const token = "bench-operator-token"
	api := httpapi.New(sys, httpapi.Options{OperatorToken: token})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := httpapi.NewHTTPServer("", api)
	go func() { _ = httpapi.Serve(srv, ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	for !sys.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: time.Minute}
	get := func(path string, partial bool) (time.Duration, int, error) {
		took, body, err := operatorGet(client, base, token, path, partial)
		return took, len(body), err
	}
	// The census behind warden_marquees, which the console's counts share:
	// timed first, before the sign-in (whose redirect shows a console
	// page) or anything else has counted, and held to the store.
	census, err := firstCensus(client, base, token, n)
	if err != nil {
		return err
	}
	if err := consoleSignIn(client, base, token); err != nil {
		return err
	}
	middle, err := cursorNear(client, base, token, n/2)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("## Operator surfaces over a large store\n\n")
	fmt.Fprintf(&b, "Command: `make bench` (`go run ./cmd/warden-bench -lists -out BENCHMARKS.md`). %d stored marquees (1%% provisioning, the rest provisioned and active), the real system, Pebble and HTTP on loopback, one client, %d requests per row after one unmeasured request; p50 and p99 of the whole request.\n\n", n, requests)
	b.WriteString("| request | what it reads | p50 | p99 | answer size |\n|---|---|---|---|---|\n")
	rows := []struct{ path, reads string }{
		{"/v1/marquees?limit=100", "the first 100 records"},
		{"/v1/marquees?limit=100&cursor=" + url.QueryEscape(middle), "100 records from the middle (cursor)"},
		{"/v1/marquees?lifecycle=provisioning&limit=100", "5,000 records, the page's budget (1% match: 50 rows and a cursor)"},
		{"/v1/marquees?status=failed&limit=100", "5,000 records, none matches (the worst filter: an empty page and a cursor)"},
		{"/v1/marquees/" + populatedID(n/2), "one record"},
		{"/ui/marquees", "a console page: 50 rows and the per-class counts (recounted in the background at most every 10 s)"},
		{"/ui/marquees?status=retrying", "the same page filtered"},
	}
	for _, r := range rows {
		partial := strings.HasPrefix(r.path, "/ui/")
		if _, _, err := get(r.path, partial); err != nil {
			return err
		}
		ds := make([]time.Duration, 0, requests)
		size := 0
		for i := 0; i < requests; i++ {
			d, sz, err := get(r.path, partial)
			if err != nil {
				return err
			}
			ds = append(ds, d)
			size = sz
		}
		fmt.Fprintf(&b, "| `GET %s` | %s | %s | %s | %d B |\n", r.path, r.reads, pct(ds, 50).Round(time.Microsecond), pct(ds, 99).Round(time.Microsecond), size)
	}
	fmt.Fprintf(&b, "\nThe first `/metrics` scrape, which counts every stored marquee and environment for `warden_marquees` and `warden_environments` (timed before any other request, so nothing has counted them yet; later scrapes within 10 s reuse the count, the next one recounts in the background; the console's per-class counts share it): %s.\n", census.Round(time.Millisecond))
	b.WriteString("\nAn open console page refreshes its main part every 2 s, so each open page costs one console-page request (the rows above) every 2 s; the per-class counts are recounted in the background at most every 10 s for all viewers together (a full read: about the census time above).\n")
	fmt.Print(b.String())
	if out != "" {
		return mdreport.Replace(out, "## Operator surfaces over a large store", b.String())
	}
	return nil
}

// cursorNear is the cursor the API gives after about the i-th marquee,
// found by following its pages of 1,000 (the cursor is opaque: the bench
// asks for it, as a client does).
func cursorNear(client *http.Client, base, token string, i int) (string, error) {
	cursor := ""
	for seen := 0; seen < i; seen += 1000 {
		_, body, err := operatorGet(client, base, token, "/v1/marquees?limit=1000&cursor="+url.QueryEscape(cursor), false)
		if err != nil {
			return "", err
		}
		var page struct {
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Next == "" {
			return "", fmt.Errorf("the list ended before marquee %d (%v)", i, err)
		}
		cursor = page.Next
	}
	return cursor, nil
}

// consoleSignIn signs client in to the console as a browser does: the
// form's page first (its cookie carries the form's token), then the form
// with that token. It fails unless a session was given, so the console
// rows time the console and not its sign-in form (they did, unnoticed,
// once the form required its token).
func consoleSignIn(client *http.Client, base, token string) error {
	resp, err := client.Get(base + "/ui/login")
	if err != nil {
		return err
	}
	resp.Body.Close()
	login, _ := url.Parse(base + "/ui/login")
	csrf := cookieValue(client.Jar, login, "warden_login")
	resp, err = client.PostForm(base+"/ui/login", url.Values{"token": {token}, "csrf": {csrf}, "next": {"/ui/marquees"}})
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	console, _ := url.Parse(base + "/ui/")
	if resp.StatusCode != http.StatusOK || isSignInForm(body) || cookieValue(client.Jar, console, "warden_session") == "" {
		return fmt.Errorf("console sign-in refused: %d %s", resp.StatusCode, body)
	}
	return nil
}

func cookieValue(jar http.CookieJar, u *url.URL, name string) string {
	for _, c := range jar.Cookies(u) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

// isSignInForm reports whether a console answer is the sign-in form.
func isSignInForm(body []byte) bool {
	return bytes.Contains(body, []byte(`action="/ui/login"`))
}

// firstCensus times the first /metrics scrape, which counts every stored
// marquee. It must come before any console page: the console's counts
// share the census, and a scrape after one reuses its count (this bench
// once timed that, 5 ms); censusCounted checks the scrape did the count.
func firstCensus(client *http.Client, base, token string, n int) (time.Duration, error) {
	took, body, err := operatorGet(client, base, token, "/metrics", false)
	if err != nil {
		return 0, err
	}
	return took, censusCounted(body, n, took)
}

// censusCounted holds a scrape that took took to have counted the n
// stored marquees itself: its warden_marquees add up to n (a scrape that
// counted nothing would time nothing), and its census is no older than
// the scrape (a count made before the request was sent is older than it,
// by at least the time between that count's start and the send).
func censusCounted(body []byte, n int, took time.Duration) error {
	if counted := metricSum(body, "warden_marquees"); int(counted) != n {
		return fmt.Errorf("GET /metrics: warden_marquees adds up to %v, not the %d stored", counted, n)
	}
	if age := time.Duration(metricSum(body, "warden_census_age_seconds") * float64(time.Second)); age > took {
		return fmt.Errorf("GET /metrics: its census is %s old, older than the scrape's %s: it reused a count made before, so its time is not a count's", age.Round(time.Millisecond), took.Round(time.Millisecond))
	}
	return nil
}

// operatorGet is one GET with the operator's token, timed from send to
// the whole body read; X-Partial asks a console page for its main part.
// Anything but a 200, or a console answering its sign-in form, is an
// error: a row must time the page it names.
func operatorGet(client *http.Client, base, token, path string, partial bool) (time.Duration, []byte, error) {
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if partial {
		req.Header.Set("X-Partial", "1")
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(t0)
	switch {
	case err != nil:
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	case resp.StatusCode != http.StatusOK:
		return 0, nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	case isSignInForm(body):
		return 0, nil, fmt.Errorf("GET %s: the console answered its sign-in form, not the page: the bench is not signed in", path)
	}
	return took, body, nil
}
