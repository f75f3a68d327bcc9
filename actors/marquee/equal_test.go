package marquee

import (
	"testing"

	"github.com/wardenhq/warden/internal/fieldcheck"
)

// A step's change check sees a change in any field of the record.
func TestEqualSeesEveryField(t *testing.T) {
	fieldcheck.Check(t, State.equal)
}
