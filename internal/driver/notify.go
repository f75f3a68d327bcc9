package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Notification is one environment event for the outside world (E10, W7):
// ready, superseded by a newer preview of its branch, or removed. Key is
// its identity, the same on every delivery.
type Notification struct {
	Key        string `json:"key"`
	Event      string `json:"event"`
	URL        string `json:"url,omitempty"`
	EnvID      string `json:"env_id"`
	Branch     string `json:"branch"`
	Revision   string `json:"revision"`
	Generation uint64 `json:"generation"`
	Detail     string `json:"detail,omitempty"`
}

// Notifier delivers notifications. A failed delivery is tried again by the
// caller with the same Notification, so a Notifier must be idempotent per
// Key.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// Webhook POSTs each notification as JSON to one endpoint, with its key as
// the Idempotency-Key; any 2xx is delivered.
type Webhook struct {
	Endpoint string
	Client   *http.Client
}

// Notify implements Notifier.
func (w *Webhook) Notify(ctx context.Context, n Notification) error {
	body, _ := json.Marshal(n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.Endpoint, bytes.NewReader(body))
	if err != nil {
		return errorf(Configuration, "notification endpoint: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.Key)
	resp, err := client(w.Client).Do(req)
	if err != nil {
		return errorf(Transient, "notification endpoint: %v", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errorf(classify(resp.StatusCode), "notification endpoint answered %d", resp.StatusCode)
	}
	return nil
}

// GitHubStatus reports previews on the pull request they were made for:
// a commit status on the environment's revision (context
// "warden/preview", linking the preview) and one comment per pull request
// and branch that always shows the newest generation's news. The comment
// carries a hidden marker with the branch and generation; it is found
// again and edited, never posted twice, and an older generation's late
// news (the superseded preview's removal) does not overwrite a newer one.
// The pull request is the one whose head is the revision, asked of
// GitHub, so nothing about pull requests is stored in warden.
type GitHubStatus struct {
	APIURL string // https://api.github.com, or an Enterprise server's
	Repo   string // owner/name
	Token  string
	Client *http.Client
	// One delivery at a time: two previews of one pull request told at
	// once would each find no comment and each post one.
	mu sync.Mutex
}

// statusContext names warden's commit status among a commit's checks.
const statusContext = "warden/preview"

var fullSHA = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// Notify implements Notifier.
func (g *GitHubStatus) Notify(ctx context.Context, n Notification) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !fullSHA.MatchString(n.Revision) {
		// A commit status and the pull request lookup need the commit's
		// full SHA; a preview made from a branch name has none to report.
		return nil
	}
	// Every event is good news for the commit: the preview did what was
	// asked (a failure stays in warden's view, not on the pull request).
	description := n.Detail
	switch n.Event {
	case "environment-ready":
		description = "preview ready"
	case "environment-superseded":
		description = "superseded by a newer push"
	case "environment-removed":
		description = "preview removed"
	}
	status := map[string]any{"state": "success", "context": statusContext, "description": clip(description, 140)}
	if n.URL != "" {
		status["target_url"] = n.URL
	}
	if err := g.call(ctx, http.MethodPost, "/statuses/"+n.Revision, status, nil); err != nil {
		return err
	}
	var pulls []struct {
		Number int    `json:"number"`
		State  string `json:"state"`
	}
	if err := g.call(ctx, http.MethodGet, "/commits/"+n.Revision+"/pulls", nil, &pulls); err != nil {
		return err
	}
	for _, pr := range pulls {
		if err := g.comment(ctx, pr.Number, n); err != nil {
			return err
		}
	}
	return nil
}

// marker finds warden's comment for a branch and the generation it shows.
var marker = regexp.MustCompile(`<!-- warden-preview branch=([a-z0-9-]+) generation=([0-9]+) -->`)

// maxCommentPages bounds the search for warden's comment: 10 pages of 100.
const maxCommentPages = 10

func (g *GitHubStatus) comment(ctx context.Context, pr int, n Notification) error {
	body := commentBody(n)
	for page := 1; page <= maxCommentPages; page++ {
		var comments []struct {
			ID   int64  `json:"id"`
			Body string `json:"body"`
		}
		path := fmt.Sprintf("/issues/%d/comments?per_page=100&page=%d", pr, page)
		if err := g.call(ctx, http.MethodGet, path, nil, &comments); err != nil {
			return err
		}
		for _, c := range comments {
			m := marker.FindStringSubmatch(c.Body)
			if m == nil || m[1] != n.Branch {
				continue
			}
			if shown, _ := strconv.ParseUint(m[2], 10, 64); shown > n.Generation {
				return nil // the comment already tells of a newer preview
			}
			if c.Body == body {
				return nil // a repeated delivery
			}
			return g.call(ctx, http.MethodPatch, fmt.Sprintf("/issues/comments/%d", c.ID), map[string]string{"body": body}, nil)
		}
		if len(comments) < 100 {
			break
		}
	}
	return g.call(ctx, http.MethodPost, fmt.Sprintf("/issues/%d/comments", pr), map[string]string{"body": body}, nil)
}

// commentBody is the comment for one notification: the marker, then one
// line for people.
func commentBody(n Notification) string {
	var line string
	short := n.Revision
	if len(short) > 7 {
		short = short[:7]
	}
	switch n.Event {
	case "environment-ready":
		line = fmt.Sprintf("Preview `%s` of %s is ready: %s", n.EnvID, short, n.URL)
	case "environment-superseded":
		line = fmt.Sprintf("Preview `%s` of %s was superseded by a newer push.", n.EnvID, short)
	case "environment-removed":
		line = fmt.Sprintf("Preview `%s` of %s was removed.", n.EnvID, short)
	default:
		line = fmt.Sprintf("Preview `%s` of %s: %s", n.EnvID, short, n.Detail)
	}
	return fmt.Sprintf("<!-- warden-preview branch=%s generation=%d -->\n%s", n.Branch, n.Generation, line)
}

// call sends one request to the repository's API; into, if not nil,
// receives the JSON answer.
func (g *GitHubStatus) call(ctx context.Context, method, path string, body, into any) error {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	u := strings.TrimRight(g.APIURL, "/") + "/repos/" + g.Repo + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return errorf(Configuration, "github notification: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client(g.Client).Do(req)
	if err != nil {
		// The URL holds no secret; the error is the transport's.
		return errorf(Transient, "github notification: %s %s: %v", method, pathOnly(u), unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode/100 != 2 {
		return errorf(classify(resp.StatusCode), "github notification: %s %s answered %d", method, pathOnly(u), resp.StatusCode)
	}
	if into != nil {
		if err := json.Unmarshal(raw, into); err != nil {
			return errorf(Transient, "github notification: %s %s: undecodable answer: %v", method, pathOnly(u), err)
		}
	}
	return nil
}

func pathOnly(u string) string {
	if p, err := url.Parse(u); err == nil {
		return p.Path
	}
	return "?"
}

func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// classify maps an answer's status to a failure kind: 429 and 5xx may
// pass, any other refusal is configuration (a wrong repository, token or
// endpoint).
func classify(status int) FailureClass {
	if status == http.StatusTooManyRequests || status >= 500 {
		return Transient
	}
	return Configuration
}

func client(c *http.Client) *http.Client {
	if c == nil {
		return http.DefaultClient
	}
	return c
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
