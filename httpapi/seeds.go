package httpapi

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// MaxSeedBody bounds a seed's SQL as the API takes it: a seed is data a
// team chose for its previews; a larger dump is a backup, not a seed.
const MaxSeedBody = 64 << 20

// routeSeeds are the platform's seeds, which previews' data is copied
// from (P20): listed to any operator or viewer, made and removed by an
// operator.
func (s *Server) routeSeeds() {
	r := s.routes
	none := []queryRule{}
	r.GET("/v1/seeds", s.query(none, s.read(s.listSeeds)))
	r.POST("/v1/seeds/:name", s.query(none, s.write(s.makeSeed)))
	r.POST("/v1/seeds/:name/remove", s.query(none, s.write(s.removeSeed)))
}

func (s *Server) listSeeds(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ Operator) {
	seeds, err := s.sys.Seeds(r.Context())
	if err != nil {
		s.writeErr(w, err)
		return
	}
	for i := range seeds {
		if seeds[i].Previews == nil {
			seeds[i].Previews = []string{}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": nonNil(seeds)})
}

// makeSeed takes the seed's SQL as the body (application/sql or
// text/plain, at most MaxSeedBody) and makes the seed from the
// application's migrations and it, once.
func (s *Server) makeSeed(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/sql" && mt != "text/plain" {
		refuse(w, unsupportedMediaType, "Content-Type must be application/sql (the seed's SQL, as the body)")
		return
	}
	if r.ContentLength > MaxSeedBody {
		refuse(w, tooLarge, fmt.Sprintf("a seed's SQL over %d bytes", MaxSeedBody))
		return
	}
	sql, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxSeedBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		refuse(w, tooLarge, fmt.Sprintf("a seed's SQL over %d bytes", MaxSeedBody))
		return
	case err != nil:
		refuse(w, invalidRequest, "body could not be read")
		return
	case len(sql) == 0:
		refuse(w, invalidRequest, "a seed's SQL is its body: none was sent")
		return
	}
	seed, err := s.sys.MakeSeed(r.Context(), p.ByName("name"), string(sql))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("seed made by an operator", "seed", seed.Name, "operator", op.Name)
	if seed.Previews == nil {
		seed.Previews = []string{}
	}
	writeJSON(w, http.StatusCreated, seed)
}

func (s *Server) removeSeed(w http.ResponseWriter, r *http.Request, p httprouter.Params, op Operator) {
	if err := s.sys.RemoveSeed(r.Context(), p.ByName("name")); err != nil {
		s.writeErr(w, err)
		return
	}
	s.log.Info("seed removed by an operator", "seed", p.ByName("name"), "operator", op.Name)
	writeJSON(w, http.StatusOK, map[string]any{"name": p.ByName("name"), "removed": true})
}
