package sim

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Regression is a failed seed written down so that a later build runs the
// same schedule (docs/rules/simulation.md, "Regressions"). A seed alone
// does not survive a change of the code: the fault points on, their
// rates, and which reach of each point fired all come from shared random
// streams that any new draw shifts. So the file keeps them as data: the
// seed (the workload's own stream, which the rest of the code does not
// draw from), the nodes, the fault points on with their rates, and, per
// point, the ordinals of its reaches that fired. Replayed, a point fires
// on exactly those reaches, whatever else the build draws.
type Regression struct {
	Seed  uint64 `json:"seed"`
	Nodes int    `json:"nodes"`
	Plant string `json:"plant,omitempty"`
	// Sleepy: the run's previews may sleep (its workload draws
	// sleep_after and visits); absent in files from before they could.
	Sleepy bool               `json:"sleepy,omitempty"`
	Rates  map[string]float64 `json:"rates"`
	Fires  map[string][]int   `json:"fires"`
	// What the failing build saw, for the reader.
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
	Note      string `json:"note,omitempty"`
}

// maxRegressionFile bounds a regression file read back.
const maxRegressionFile = 1 << 20

// regressionOf is the file a failed run leaves.
func regressionOf(o Options, r SeedRun) Regression {
	return Regression{Seed: o.Seed, Nodes: max(o.Nodes, 1), Plant: o.Plant, Sleepy: !o.NoSleep, Rates: r.plan.rate, Fires: r.plan.firedAt,
		Invariant: r.Violation.Invariant, Detail: r.Violation.Detail}
}

// Options is the run the file replays.
func (g Regression) Options() Options {
	return Options{Seed: g.Seed, Nodes: g.Nodes, Plant: g.Plant, NoSleep: !g.Sleepy, replay: &g}
}

// WriteRegression writes g under dir as seed-<seed>-nodes-<n>.json and
// returns its path.
func WriteRegression(dir string, g Regression) (string, error) {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("seed-%d-nodes-%d", g.Seed, g.Nodes)
	if g.Plant != "" {
		name += "-plant-" + g.Plant
	}
	path := filepath.Join(dir, name+".json")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadRegressions reads every *.json file under dir, in name order.
func ReadRegressions(dir string) ([]string, []Regression, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(paths)
	out := make([]Regression, 0, len(paths))
	for _, p := range paths {
		g, err := readRegression(p)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, g)
	}
	return paths, out, nil
}

func readRegression(path string) (Regression, error) {
	var g Regression
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		return g, err
	case len(b) > maxRegressionFile:
		return g, fmt.Errorf("%s: %d bytes; a regression file is at most %d", path, len(b), maxRegressionFile)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	if g.Nodes < 1 || g.Nodes > maxNodes {
		return g, fmt.Errorf("%s: nodes %d: 1..%d", path, g.Nodes, maxNodes)
	}
	for p := range g.Fires {
		if _, on := g.Rates[p]; !on {
			return g, fmt.Errorf("%s: fires point %q, which is not on", path, p)
		}
		if !slices.IsSorted(g.Fires[p]) {
			return g, fmt.Errorf("%s: the reaches of %q are not in order", path, p)
		}
	}
	return g, nil
}
