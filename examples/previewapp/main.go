// Command previewapp is the application the local preview platform
// previews (docs/rules/platform.md P3): a web page showing the revision it
// runs, its environment and a row read from its own database, and a
// health endpoint reporting the same identity and whether its database
// answers, with its own role (P6, P8, P13): 200 only when it does. Its
// migrations are in migrations/, its image is built from Containerfile.
package main

import (
	"context"
	"encoding/json"
	"html/template"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Preview {{.Environment}}</title></head>
<body><h1>Preview {{.Environment}}</h1>
<p>Revision: <code>{{.Revision}}</code></p>
<p>From its database: {{.Row}}</p></body></html>
`))

// healthAnswer is the /healthz answer: who this instance is, and each
// dependency's state ("ok", or why not).
type healthAnswer struct {
	Environment  string            `json:"environment"`
	Revision     string            `json:"revision"`
	Generation   uint64            `json:"generation"`
	Dependencies map[string]string `json:"dependencies"`
}

func main() {
	gen, _ := strconv.ParseUint(os.Getenv("PREVIEW_GENERATION"), 10, 64)
	id := healthAnswer{Environment: os.Getenv("PREVIEW_ENVIRONMENT"), Revision: os.Getenv("PREVIEW_REVISION"), Generation: gen}
	dsn := os.Getenv("DATABASE_URL")
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		h, status := id, http.StatusOK
		h.Dependencies = map[string]string{"database": "ok"}
		if _, err := greeting(r.Context(), dsn); err != nil {
			h.Dependencies["database"], status = "unreachable: "+err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(h)
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		row, err := greeting(r.Context(), dsn)
		if err != nil {
			row = "(database unavailable: " + err.Error() + ")"
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, map[string]string{"Environment": id.Environment, "Revision": id.Revision, "Row": row})
	})
	addr := os.Getenv("PREVIEW_LISTEN")
	if addr == "" {
		addr = "127.0.0.1:8000"
	}
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}

// greeting reads the row the migrations wrote.
func greeting(ctx context.Context, dsn string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	var s string
	err = c.QueryRow(ctx, "SELECT text FROM greeting WHERE id = 1").Scan(&s)
	return s, err
}
