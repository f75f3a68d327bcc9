package errs

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKindOf(t *testing.T) {
	for _, k := range []Class{Invalid, NotFound, Conflict, Forbidden, IdempotencyKeyReused, Overloaded, Unavailable} {
		err := fmt.Errorf("marquee m-1: %w", fmt.Errorf("%w: deeper", k))
		if got := ClassOf(err); got != k {
			t.Errorf("ClassOf(%v) = %v, want %v", err, got, k)
		}
		if !errors.Is(err, k) {
			t.Errorf("errors.Is(%v, %v) is false", err, k)
		}
	}
	if ClassOf(fmt.Errorf("ask: %w", context.DeadlineExceeded)) != Unavailable {
		t.Error("a deadline is Unavailable: the caller may try again")
	}
	if ClassOf(errors.New("disk on fire")) != Other || ClassOf(nil) != Other {
		t.Error("an error of no kind is Other")
	}
}
