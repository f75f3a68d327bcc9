package sim

import "fmt"

// Divergence is where two runs of one seed first differ.
type Divergence struct {
	Seed  uint64
	Index int
	A, B  string
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("seed %d is not deterministic: trace line %d differs:\n  first:  %s\n  second: %s", d.Seed, d.Index, d.A, d.B)
}

// CheckDeterminism runs a seed twice and compares the traces line by line.
func CheckDeterminism(o Options) (SeedRun, *Divergence) {
	a := Run(o)
	b := Run(o)
	if a.Hash == b.Hash {
		return a, nil
	}
	for i := 0; i < max(len(a.Trace), len(b.Trace)); i++ {
		var la, lb string
		if i < len(a.Trace) {
			la = a.Trace[i]
		}
		if i < len(b.Trace) {
			lb = b.Trace[i]
		}
		if la != lb {
			return a, &Divergence{Seed: o.Seed, Index: i, A: la, B: lb}
		}
	}
	return a, &Divergence{Seed: o.Seed, Index: -1}
}
