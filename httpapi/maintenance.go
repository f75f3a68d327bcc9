package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/errs"
)

// Maintenance is what the operator-only maintenance endpoints ask of the
// process that owns the store (D4, D6). Nil: the endpoints answer 404.
type Maintenance interface {
	// Backup writes a consistent copy of the store to w as a tar stream,
	// its manifest first, while the process keeps serving.
	Backup(ctx context.Context, w io.Writer) error
	// Verify checks the store as it is at one instant.
	Verify(ctx context.Context) (actors.VerifyReport, error)
	// Reseal rewrites the records of this node's shards still sealed
	// under an older key.
	Reseal(ctx context.Context) (actors.ResealResult, error)
}

// BackupContentType is the backup stream's media type.
const BackupContentType = "application/x-tar"

func (s *Server) routeMaintenance(r *routeTable) {
	r.POST("/v1/admin/backup", s.query([]queryRule{}, s.write(s.backup)))
	r.GET("/v1/admin/verify", s.query([]queryRule{}, s.write(s.verify)))
	r.POST("/v1/admin/reseal", s.query([]queryRule{}, s.write(s.reseal)))
}

// backup is POST /v1/admin/backup: the copy is made before the first byte
// is sent, so a refusal is still an error answer; a stream cut short
// after that is caught by the client against the manifest's digests.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	if s.opts.Maintenance == nil {
		refuse(w, notFound, "this warden takes no backups")
		return
	}
	if !s.emptyBody(w, r) {
		return
	}
	s.log.Info("backup requested", "by", op.Name)
	lazy := &lazyHeader{w: w}
	if err := s.opts.Maintenance.Backup(r.Context(), lazy); err != nil {
		s.log.Error("backup failed", "by", op.Name, "err", err)
		if !lazy.started {
			s.writeErr(w, fmt.Errorf("%w: backup: %v", errs.Unavailable, err))
		}
	}
}

// lazyHeader writes the backup's status and type with its first byte.
type lazyHeader struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyHeader) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", BackupContentType)
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

// verify is GET /v1/admin/verify: the report, 200 whether or not it found
// a problem (the report says; the CLI exits non-zero on one).
func (s *Server) verify(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	if s.opts.Maintenance == nil {
		refuse(w, notFound, "this warden has no store to verify")
		return
	}
	rep, err := s.opts.Maintenance.Verify(r.Context())
	if err != nil {
		s.writeErr(w, fmt.Errorf("%w: verify: %v", errs.Unavailable, err))
		return
	}
	s.log.Info("store verified", "by", op.Name, "problems", len(rep.Problems)+rep.Unlisted)
	writeJSON(w, http.StatusOK, verifyAnswer{OK: rep.OK(), Report: rep})
}

type verifyAnswer struct {
	OK     bool                `json:"ok"`
	Report actors.VerifyReport `json:"report"`
}

// reseal is POST /v1/admin/reseal: this node's part of an online rekey.
func (s *Server) reseal(w http.ResponseWriter, r *http.Request, _ httprouter.Params, op Operator) {
	if s.opts.Maintenance == nil {
		refuse(w, notFound, "this warden has no store to reseal")
		return
	}
	if !s.emptyBody(w, r) {
		return
	}
	res, err := s.opts.Maintenance.Reseal(r.Context())
	if err != nil {
		s.writeErr(w, fmt.Errorf("%w: reseal: %v", errs.Unavailable, err))
		return
	}
	s.log.Info("records resealed", "by", op.Name, "rewritten", res.Rewritten, "elsewhere", res.Elsewhere, "failed", res.Failed, "active", res.Active)
	writeJSON(w, http.StatusOK, res)
}
