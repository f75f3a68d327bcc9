package driver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestW6DispatchAsksForRunDetails: the dispatch asks GitHub for the run's
// details and records its id and URL where GitHub gives them (200); a
// GitHub that answers 204 without them is still a dispatched run; an
// undecodable or unsafe URL is dropped, never the dispatch.
func TestW6DispatchAsksForRunDetails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		answer string
		want   Run
	}{
		{"details", http.StatusOK, `{"workflow_run_id": 4242, "run_url": "https://api.github.com/repos/acme/infra/actions/runs/4242", "html_url": "https://github.com/acme/infra/actions/runs/4242"}`,
			Run{ID: 4242, URL: "https://github.com/acme/infra/actions/runs/4242"}},
		{"api url only", http.StatusOK, `{"workflow_run_id": 7, "run_url": "https://api.github.com/repos/acme/infra/actions/runs/7"}`,
			Run{ID: 7, URL: "https://api.github.com/repos/acme/infra/actions/runs/7"}},
		{"no details (204)", http.StatusNoContent, "", Run{}},
		{"undecodable details", http.StatusOK, `not json`, Run{}},
		{"unsafe url", http.StatusOK, `{"workflow_run_id": 9, "html_url": "javascript:alert(1)"}`, Run{ID: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked map[string]any
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				require.Equal(t, "/repos/acme/infra/actions/workflows/marquee.yml/dispatches", r.URL.Path)
				require.NoError(t, json.NewDecoder(r.Body).Decode(&asked))
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			g := &GitHub{APIURL: srv.URL, Repo: "acme/infra", Workflow: "marquee.yml", Ref: "main", Token: "t", Client: srv.Client()}
			run, err := g.Dispatch(context.Background(), DispatchRequest{MarqueeID: "m-1", Generation: 3, Action: "apply",
				CallbackURL: "https://warden.example.org/v1/webhooks/terraform", CallbackToken: "wcb1.k.m-1.3.9.mac"})
			require.NoError(t, err)
			require.Equal(t, tc.want, run)
			require.Equal(t, true, asked["return_run_details"], "the dispatch asks for run details")
			inputs := asked["inputs"].(map[string]any)
			require.Equal(t, "3", inputs["generation"])
			require.Equal(t, "wcb1.k.m-1.3.9.mac", inputs["callback_token"])
		})
	}
}
