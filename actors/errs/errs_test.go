package errs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKindOf(t *testing.T) {
	for _, k := range []Kind{Invalid, NotFound, Conflict, Forbidden, IdempotencyKeyReused, Overloaded, Unavailable} {
		err := fmt.Errorf("marquee m-1: %w", fmt.Errorf("%w: deeper", k))
		if got := KindOf(err); got != k {
			t.Errorf("KindOf(%v) = %v, want %v", err, got, k)
		}
		if !errors.Is(err, k) {
			t.Errorf("errors.Is(%v, %v) is false", err, k)
		}
	}
	if KindOf(fmt.Errorf("ask: %w", context.DeadlineExceeded)) != Unavailable {
		t.Error("a deadline is Unavailable: the caller may try again")
	}
	if KindOf(errors.New("disk on fire")) != Other || KindOf(nil) != Other {
		t.Error("an error of no kind is Other")
	}
}
