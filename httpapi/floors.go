//go:build benchfloor

package httpapi

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// This file is built only with -tags benchfloor, the build make bench
// measures: a server built without it has no benchmark routes and no
// benchmark code.

// Floor is what the benchmark's durable floors write (internal/benchfloor):
// the body in one synced batch, or the keys one callback writes.
type Floor interface {
	Write(body []byte) error
	WriteRecords(body []byte) error
}

// ServeFloors adds the benchmark's baselines, before the server serves:
// POST /v1/webhooks/noop (authenticated and decoded like the real
// webhook, answered without an actor or a write), and the durable floors
// POST /v1/webhooks/floor and /v1/webhooks/floor-records (HTTP and f's
// one synced batch, nothing else), each behind the same readiness and
// query checks as the real webhook.
func (s *Server) ServeFloors(f Floor) {
	noQuery := []queryRule{}
	s.routes.POST("/v1/webhooks/noop", s.query(noQuery, s.ready(s.noop)))
	s.routes.POST("/v1/webhooks/floor", s.query(noQuery, s.ready(s.floor(f.Write))))
	s.routes.POST("/v1/webhooks/floor-records", s.query(noQuery, s.ready(s.floor(f.WriteRecords))))
}

// noop is the benchmark's baseline: the webhook's own intake
// (callbackIn), and no actor, no persistence.
func (s *Server) noop(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	in, _, ok := s.callbackIn(w, r)
	if !ok {
		return
	}
	gen := in.Callback.Generation
	writeJSON(w, http.StatusOK, map[string]any{"result": "ignored", "marquee_id": in.MarqueeID, "generation": gen, "received_generation": gen})
}

// floor is one of the durable path's floors (ServeFloors): HTTP and
// the body handed to write, nothing else.
func (s *Server) floor(write func(body []byte) error) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		body, ok := readBody(w, r, false)
		if !ok {
			return
		}
		if err := write(body); err != nil {
			s.writeErr(w, err)
			return
		}
		writeRaw(w, http.StatusOK, floorAnswer)
	}
}

var floorAnswer = []byte(`{"result":"ok"}`)
