package slots_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

// BenchmarkExtendLongHistory (issue 13, "aggregates load in constant time"):
// on the embedded bbolt store, the median `extend` on a slot whose stream
// holds BENCH_SLOT_EVENTS (default 100,000) events against the same command
// on a fresh slot, alternating the two so load on the machine hits both
// alike. Target: ratio ≤ 1.5. Baseline in the same run: a full fold of the
// long stream (what every command cost before the SlotCache).
func BenchmarkExtendLongHistory(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_SLOT_EVENTS")); err == nil && v > 0 {
		n = v
	}
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	longHistory(b, st, "long", n)
	longHistory(b, st, "fresh", 0)
	svc := slots.NewService(st, slots.Config{})

	const trials = 300
	// Past the long history's last deadline (it extends by a second per
	// event): an earlier one is a separate, confirmed command.
	base := time.Now().Add(time.Duration(n)*time.Second + 4*time.Hour)
	extend := func(slot string, i int) time.Duration {
		t0 := time.Now()
		if err := svc.Extend(ctx, alice, slot, slots.ExtendCmd{Until: base.Add(time.Duration(i) * time.Second)}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	// Each slot's first command folds its whole stream once (a cold cache,
	// as after a restart): reported, not counted in the medians.
	coldLong := extend("long", 0)
	extend("fresh", 0)
	b.ResetTimer()
	var long, fresh []time.Duration
	for i := 1; i <= trials; i++ {
		long = append(long, extend("long", i))
		fresh = append(fresh, extend("fresh", i))
	}
	b.StopTimer()
	var full []time.Duration
	for range 5 {
		t0 := time.Now()
		if _, err := slots.LoadSlot(ctx, st, "long"); err != nil {
			b.Fatal(err)
		}
		full = append(full, time.Since(t0))
	}
	ml, mf, mfull := median(long), median(fresh), median(full)
	fmt.Printf("slots extend: %d-event slot median %s, fresh slot median %s, ratio %.2f (target ≤ 1.5); %d trials each, alternating; first extend of the long slot (cold cache) %s\n",
		n+2, ml, mf, float64(ml)/float64(mf), trials, coldLong)
	fmt.Printf("slots extend baseline: full fold of the %d-event stream (every command before the cache) median %s = %.0f× the fresh extend\n",
		n+2, mfull, float64(mfull)/float64(mf))
	b.ReportMetric(float64(ml)/float64(mf), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
