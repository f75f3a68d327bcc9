package httpapi

import (
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/internal/driver"
)

// The waker. A sleeping preview's route sends every request under its
// host to driver.WakerPath, naming the preview in driver.HeaderWake and
// the path asked for in driver.HeaderWakePath, both set by the route over
// anything the client sent. A visit is recorded as the preview's wake
// (the commit is the durable wake request, E20) and answered with a small
// page that says the preview is waking and asks again shortly; other
// clients read Retry-After. A HEAD or a health check wakes nothing. The
// waker takes no credential: whoever reaches it can do only what a visit
// to the preview's host does.

// wakerMethods are the methods a visit may come with (a GET's route
// answers HEAD too).
var wakerMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// wakerRetryAfter is what the waker's answer asks a client to wait, in
// seconds: about the time a wake takes here.
const wakerRetryAfter = "2"

func (s *Server) waker(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	id := r.Header.Get(driver.HeaderWake)
	if !environment.ValidID(id) {
		refuse(w, invalidRequest, "the waker answers requests a sleeping preview's route sends it ("+driver.HeaderWake+" names the preview)")
		return
	}
	path := r.Header.Get(driver.HeaderWakePath)
	waking := "the next visit wakes it"
	if environment.IsVisit(r.Method, path) {
		e, err := s.sys.Visit(r.Context(), id)
		switch {
		case errs.ClassOf(err) == errs.NotFound:
			waking = "no preview has that name" // a request a route did not send: nothing to say in the log
		case err != nil:
			s.log.Warn("waker: the wake of a preview was not recorded", "environment", id, "err", err)
			waking = "its wake could not be recorded yet; this page asks again"
		case e.Tombstone != nil || e.Desired == "removed":
			waking = "it was removed"
		default:
			waking = "it is waking"
		}
	}
	w.Header().Set("Retry-After", wakerRetryAfter)
	w.Header().Set("Cache-Control", "no-store")
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "preview %s is asleep: %s; ask again in %s s\n", id, waking, wakerRetryAfter)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="%s">`+
		`<title>Waking preview %s</title></head><body><h1>Preview %s is waking</h1><p>It was asleep: %s. `+
		`This page reloads itself in a moment and shows the preview once it serves.</p></body></html>`+"\n",
		wakerRetryAfter, html.EscapeString(id), html.EscapeString(id), html.EscapeString(waking))
}
