//go:build !benchfloor

package main

import (
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/persistence"
)

// floorsBuilt: a production build has no benchmark floors; --bench-noop is
// refused before anything starts.
const floorsBuilt = false

func serveFloors(*httpapi.Server, *persistence.Store) {}
