package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeGitHub is the slice of GitHub's REST API the preview notifier uses:
// commit statuses, the pull requests of a commit, and issue comments, kept
// in memory.
type fakeGitHub struct {
	t        *testing.T
	mu       sync.Mutex
	statuses map[string][]map[string]any // by sha
	pulls    map[string][]int            // sha -> pull request numbers
	comments map[int][]*fakeComment      // pr -> comments
	nextID   int64
	fail     int // answer this many requests with 502 first
	posts    int
}

type fakeComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func newFakeGitHub(t *testing.T) (*fakeGitHub, *httptest.Server) {
	f := &fakeGitHub{t: t, statuses: map[string][]map[string]any{}, pulls: map[string][]int{}, comments: map[int][]*fakeComment{}}
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Equal(f.t, "Bearer gh-token", r.Header.Get("Authorization"))
	if f.fail > 0 {
		f.fail--
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/repos/acme/app/") {
		w.WriteHeader(http.StatusNotFound) // as GitHub answers for a repository it does not show this token
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/repos/acme/app/"), "/")
	var body map[string]any
	if r.Body != nil {
		_ = json.NewDecoder(r.Body).Decode(&body)
	}
	answer := func(v any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.Method == "POST" && parts[0] == "statuses":
		f.statuses[parts[1]] = append(f.statuses[parts[1]], body)
		w.WriteHeader(http.StatusCreated)
		answer(body)
	case r.Method == "GET" && parts[0] == "commits" && len(parts) == 3 && parts[2] == "pulls":
		var out []map[string]any
		for _, n := range f.pulls[parts[1]] {
			out = append(out, map[string]any{"number": n, "state": "open"})
		}
		if out == nil {
			out = []map[string]any{}
		}
		answer(out)
	case r.Method == "GET" && parts[0] == "issues" && len(parts) == 3 && parts[2] == "comments":
		pr, _ := strconv.Atoi(parts[1])
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		cs := f.comments[pr]
		from := min((page-1)*100, len(cs))
		answer(cs[from:min(from+100, len(cs))])
	case r.Method == "POST" && parts[0] == "issues" && len(parts) == 3 && parts[2] == "comments":
		pr, _ := strconv.Atoi(parts[1])
		f.nextID++
		f.posts++
		c := &fakeComment{ID: f.nextID, Body: body["body"].(string)}
		f.comments[pr] = append(f.comments[pr], c)
		w.WriteHeader(http.StatusCreated)
		answer(c)
	case r.Method == "PATCH" && parts[0] == "issues" && parts[1] == "comments":
		id, _ := strconv.ParseInt(parts[2], 10, 64)
		for _, cs := range f.comments {
			for _, c := range cs {
				if c.ID == id {
					c.Body = body["body"].(string)
					answer(c)
					return
				}
			}
		}
		w.WriteHeader(http.StatusNotFound)
	default:
		f.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}
}

const (
	shaOne = "1111111111111111111111111111111111111111"
	shaTwo = "2222222222222222222222222222222222222222"
)

// TestW7GitHubStatusAndOneComment follows a pull request: the first head's
// preview is ready (a status linking it, one comment), a push makes a
// second preview ready (its own status; the same comment edited), the
// first one's late "superseded" and "removed" news do not overwrite the
// newer comment, and the second's removal edits it again. Never a second
// comment; repeated deliveries change nothing.
func TestW7GitHubStatusAndOneComment(t *testing.T) {
	f, srv := newFakeGitHub(t)
	f.comments[7] = []*fakeComment{{ID: 900, Body: "LGTM"}}
	f.nextID = 900
	f.pulls[shaOne], f.pulls[shaTwo] = []int{7}, []int{7}
	g := &GitHubStatus{APIURL: srv.URL, Repo: "acme/app", Token: "gh-token"}
	ctx := context.Background()
	notify := func(n Notification) { require.NoError(t, g.Notify(ctx, n)) }
	ours := func() *fakeComment {
		var found []*fakeComment
		for _, c := range f.comments[7] {
			if strings.Contains(c.Body, "warden-preview") {
				found = append(found, c)
			}
		}
		require.Len(t, found, 1, "one comment for the pull request's previews")
		return found[0]
	}

	readyOne := Notification{Key: "pr-7-1111111-1", Event: "environment-ready", URL: "https://feature-x.preview.acme.dev", EnvID: "pr-7-1111111",
		Branch: "feature-x", Revision: shaOne, Generation: 1}
	notify(readyOne)
	require.Equal(t, "success", f.statuses[shaOne][0]["state"])
	require.Equal(t, "warden/preview", f.statuses[shaOne][0]["context"])
	require.Equal(t, readyOne.URL, f.statuses[shaOne][0]["target_url"])
	require.Contains(t, ours().Body, "is ready: https://feature-x.preview.acme.dev")
	notify(readyOne) // a repeated delivery
	require.Equal(t, 1, f.posts)

	readyTwo := Notification{Key: "pr-7-2222222-2", Event: "environment-ready", URL: "https://feature-x.preview.acme.dev", EnvID: "pr-7-2222222",
		Branch: "feature-x", Revision: shaTwo, Generation: 2}
	notify(readyTwo)
	require.Contains(t, ours().Body, "`pr-7-2222222` of 2222222 is ready")

	notify(Notification{Key: "pr-7-1111111-1-superseded", Event: "environment-superseded", EnvID: "pr-7-1111111", Branch: "feature-x", Revision: shaOne, Generation: 1})
	notify(Notification{Key: "pr-7-1111111-1-removed", Event: "environment-removed", EnvID: "pr-7-1111111", Branch: "feature-x", Revision: shaOne, Generation: 1})
	require.Contains(t, ours().Body, "`pr-7-2222222` of 2222222 is ready", "an older preview's news never overwrites the newer one's")
	last := func(sha string) map[string]any { return f.statuses[sha][len(f.statuses[sha])-1] }
	require.Equal(t, "preview removed", last(shaOne)["description"])
	require.Equal(t, "superseded by a newer push", f.statuses[shaOne][len(f.statuses[shaOne])-2]["description"])
	require.Nil(t, last(shaOne)["target_url"], "a removed preview links nowhere")

	notify(Notification{Key: "pr-7-2222222-2-removed", Event: "environment-removed", EnvID: "pr-7-2222222", Branch: "feature-x", Revision: shaTwo, Generation: 2})
	require.Contains(t, ours().Body, "`pr-7-2222222` of 2222222 was removed.")
	require.Equal(t, 1, f.posts, "edited, never posted twice")
	require.Equal(t, "LGTM", f.comments[7][0].Body, "other comments untouched")
}

// TestW7GitHubFailuresAreRetryableOrNot: a 502 is transient (the outbox
// tries again), a 404 (wrong repository) is configuration, and neither
// error holds the token.
func TestW7GitHubFailuresAreRetryableOrNot(t *testing.T) {
	f, srv := newFakeGitHub(t)
	g := &GitHubStatus{APIURL: srv.URL, Repo: "acme/app", Token: "gh-token"}
	n := Notification{Key: "k", Event: "environment-ready", EnvID: "e", Branch: "b", Revision: shaOne, Generation: 1, URL: "https://b.example"}
	f.fail = 1
	err := g.Notify(context.Background(), n)
	require.Equal(t, Transient, ClassOf(err))
	require.NoError(t, g.Notify(context.Background(), n), "the next delivery goes through")

	wrong := &GitHubStatus{APIURL: srv.URL, Repo: "acme/missing", Token: "gh-token"}
	err = wrong.Notify(context.Background(), n)
	require.Equal(t, Configuration, ClassOf(err))
	require.NotContains(t, fmt.Sprint(err), "gh-token")

	// A revision that is not a full SHA has no commit to report on.
	require.NoError(t, g.Notify(context.Background(), Notification{Key: "x", Event: "environment-ready", Revision: "main"}))
}
