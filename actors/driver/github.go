package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GitHub dispatches a workflow through the GitHub Actions REST API
// (workflow_dispatch). APIURL is configurable for GitHub Enterprise or a
// local test server.
type GitHub struct {
	APIURL   string // e.g. https://api.github.com
	Repo     string // owner/name
	Workflow string // file name or id
	Ref      string
	Token    string // secret: only ever in the Authorization header
	Client   *http.Client
}

// maxErrorBody bounds how much of an error answer is read into a message.
const maxErrorBody = 512

// Dispatch implements Dispatcher. 204 is success; 429 and 5xx are transient;
// any other 4xx is a configuration failure (wrong repo, workflow, ref or
// token) that retrying cannot fix.
func (g *GitHub) Dispatch(ctx context.Context, r DispatchRequest) error {
	body, _ := json.Marshal(map[string]any{
		"ref": g.Ref,
		"inputs": map[string]string{
			"marquee_id":   r.MarqueeID,
			"generation":   strconv.FormatUint(r.Generation, 10),
			"action":       r.Action,
			"callback_url": r.CallbackURL,
		},
	})
	u := strings.TrimRight(g.APIURL, "/") + "/repos/" + g.Repo + "/actions/workflows/" + url.PathEscape(g.Workflow) + "/dispatches"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return errorf(Configuration, "build dispatch request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+g.Token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Content-Type", "application/json")
	client := g.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return errorf(Transient, "dispatch to %s: %v", g.APIURL, redactURLError(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return errorf(Transient, "github answered %d: %s", resp.StatusCode, oneLine(snippet))
	default:
		return errorf(Configuration, "github answered %d: %s", resp.StatusCode, oneLine(snippet))
	}
}

func oneLine(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// redactURLError drops the URL's user info and query from a net/http error
// (neither holds our token, but a configured URL might hold someone's).
func redactURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s: %v", ue.Op, ue.Err)
	}
	return err.Error()
}
