package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"gopkg.in/yaml.v3"
)

// OpenAPIYAML is the API's own description (O10), written by hand beside
// the handlers it describes; a test fails when a route is missing from it,
// and the end-to-end tests validate what they send and get against it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON is the document as served at /v1/openapi.json.
var openAPIJSON = func() []byte {
	var doc any
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		panic(fmt.Sprintf("openapi.yaml: %v", err)) // the tests load it; a broken one never ships
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("openapi.yaml: %v", err))
	}
	return b
}()

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIJSON)
}
