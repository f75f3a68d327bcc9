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

// Dispatch implements Dispatcher. It asks for run details: a GitHub
// that knows the parameter answers 200 with the run's id and URLs, one that
// does not answers 204, and both are success. 429 and 5xx are transient;
// any other 4xx is a configuration failure (wrong repo, workflow, ref or
// token) that retrying cannot fix.
func (g *GitHub) Dispatch(ctx context.Context, r DispatchRequest) (Run, error) {
	inputs := map[string]string{
		"marquee_id":   r.MarqueeID,
		"generation":   strconv.FormatUint(r.Generation, 10),
		"action":       r.Action,
		"callback_url": r.CallbackURL,
	}
	if r.CallbackToken != "" {
		inputs["callback_token"] = r.CallbackToken
	}
	body, _ := json.Marshal(map[string]any{"ref": g.Ref, "inputs": inputs, "return_run_details": true})
	u := strings.TrimRight(g.APIURL, "/") + "/repos/" + g.Repo + "/actions/workflows/" + url.PathEscape(g.Workflow) + "/dispatches"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return Run{}, errorf(Configuration, "build dispatch request: %v", err)
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
		return Run{}, errorf(Transient, "dispatch to %s: %v", g.APIURL, redactURLError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxRunDetails))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return Run{}, nil
	case resp.StatusCode == http.StatusOK:
		// Run details are a help, not a condition: an answer that does not
		// decode still means the run was accepted.
		var d struct {
			RunID   uint64 `json:"workflow_run_id"`
			HTMLURL string `json:"html_url"`
			RunURL  string `json:"run_url"`
		}
		_ = json.Unmarshal(answer, &d)
		run := Run{ID: d.RunID, URL: d.HTMLURL}
		if run.URL == "" {
			run.URL = d.RunURL
		}
		if len(run.URL) > 512 || !strings.HasPrefix(run.URL, "https://") && !strings.HasPrefix(run.URL, "http://") {
			run.URL = ""
		}
		return run, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return Run{}, errorf(Transient, "github answered %d: %s", resp.StatusCode, oneLine(clipBytes(answer)))
	default:
		return Run{}, errorf(Configuration, "github answered %d: %s", resp.StatusCode, oneLine(clipBytes(answer)))
	}
}

// maxRunDetails bounds the dispatch answer read: run details are three
// short fields.
const maxRunDetails = 4 << 10

func clipBytes(b []byte) []byte {
	if len(b) > maxErrorBody {
		return b[:maxErrorBody]
	}
	return b
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
