//go:build benchfloor

package main

import (
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/benchfloor"
	"github.com/wardenhq/warden/persistence"
)

// floorsBuilt: this is make bench's build (-tags benchfloor), which serves
// the benchmark's floors under --bench-noop. No other build links them.
const floorsBuilt = true

func serveFloors(api *httpapi.Server, st *persistence.Store) { api.ServeFloors(benchfloor.New(st)) }
