package process

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 8 * mib, floor: 64 * mib, base: 100, want: 700},   // goal 64 MiB
		{live: 32 * mib, floor: 64 * mib, base: 100, want: 100},  // at half the floor, GOGC's own goal
		{live: 48 * mib, floor: 64 * mib, base: 100, want: 100},  // past it too
		{live: 200 * mib, floor: 64 * mib, base: 100, want: 100}, // over the floor
		{live: 8 * mib, floor: 64 * mib, base: 1000, want: 1000}, // a larger base wins
		{live: 1024, floor: 64 * mib, base: 100, want: maxGCPercent},
		{live: 0, floor: 64 * mib, base: 100, want: maxGCPercent},
	} {
		if got := gcPercentFor(c.live, c.floor, c.base); got != c.want {
			t.Errorf("live %d, floor %d, base %d: GOGC %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// Holding the floor raises GOGC while the heap is small, after every
// collection; the last release gives the runtime its GOGC back.
func TestHoldHeapFloor(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: the heap floor leaves it alone")
	}
	base := gcPercent()
	a := holdHeapFloor(1 << 30)
	b := holdHeapFloor(1 << 30)
	if gcPercent() <= base {
		t.Fatalf("GOGC %d under a 1 GiB floor", gcPercent())
	}
	// Every collection tunes it again: set it back, and the next one
	// raises it.
	debug.SetGCPercent(base)
	runtime.GC()
	// The finalizer that re-tunes runs after the collection, on the
	// finalizer goroutine: wait for it (no time bound is asserted).
	for deadline := time.Now().Add(30 * time.Second); gcPercent() <= base; {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d under a 1 GiB floor", gcPercent())
		}
		time.Sleep(time.Millisecond)
		runtime.GC()
	}
	a()
	a() // twice is once
	if gcPercent() <= base {
		t.Fatalf("GOGC back to %d while a holder remains", gcPercent())
	}
	b()
	if got := gcPercent(); got != base {
		t.Fatalf("GOGC %d after the last release, want %d", got, base)
	}
	runtime.GC()
	runtime.GC()
	if got := gcPercent(); got != base {
		t.Fatalf("a released floor's sentinel set GOGC %d", got)
	}
	if rel := holdHeapFloor(-1); gcPercent() != base {
		t.Fatal("a negative floor changed GOGC")
	} else {
		rel()
	}
}
