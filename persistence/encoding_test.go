package persistence_test

import (
	"math"
	"testing"
	"time"

	"github.com/agentstate/agentstate/persistence"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CheckedNanos, the insert path's unchecked conversion, agrees with
// StoredNanos on every storable time, before and after the epoch, and
// undoes Stamp.
func TestCheckedNanosAgreesWithStoredNanos(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2031, 3, 4, 5, 6, 7, 123456789, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 1, time.UTC),
		time.Unix(0, math.MinInt64+1),
		time.Unix(0, math.MaxInt64-1),
	} {
		ts := timestamppb.New(tm)
		want, err := persistence.StoredNanos("t", ts)
		if err != nil {
			t.Fatalf("%v: %v", tm, err)
		}
		if got := persistence.CheckedNanos(ts); got != want {
			t.Fatalf("%v: CheckedNanos %d, StoredNanos %d", tm, got, want)
		}
		if got := persistence.CheckedNanos(persistence.Stamp(want)); got != want {
			t.Fatalf("%v: CheckedNanos(Stamp(n)) = %d, want %d", tm, got, want)
		}
	}
	if persistence.CheckedNanos(nil) != 0 {
		t.Fatal("nil must be 0 (unset)")
	}
}
