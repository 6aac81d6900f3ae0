package vdso

import (
	"os"
	"runtime/pprof"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

var clocks = []int32{unix.CLOCK_MONOTONIC_RAW, unix.CLOCK_BOOTTIME, unix.CLOCK_MONOTONIC}

func mustInit(t *testing.T) {
	t.Helper()
	if err := Init(clocks...); err != nil {
		// Every kernel this project runs on (x86-64, 2.6 or later) maps a
		// vDSO; one that does not is a finding, not a skip.
		t.Fatal(err)
	}
}

func syscallRead(t *testing.T, id int32) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestInterleavesWithSyscall: readings through the vDSO and through the
// system call, taken alternately, never go back, for each clock the
// runtime reads.
func TestInterleavesWithSyscall(t *testing.T) {
	mustInit(t)
	for _, id := range clocks {
		last := syscallRead(t, id)
		for i := range 20000 {
			v, ok := ClockGettime(id)
			if !ok {
				t.Fatalf("clock %d: vDSO read failed", id)
			}
			s := syscallRead(t, id)
			if v < last || s < v {
				t.Fatalf("clock %d, reading %d: syscall %d, vDSO %d, syscall %d: out of order", id, i, last, v, s)
			}
			last = s
		}
	}
}

// TestFreshGoroutinesAndSignals calls through the vDSO from many new
// goroutines (smallest stacks: the frame's stack check must grow them)
// while the CPU profiler's signals arrive, and checks each goroutine's
// readings only grow.
func TestFreshGoroutinesAndSignals(t *testing.T) {
	mustInit(t)
	f, err := os.CreateTemp(t.TempDir(), "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	defer pprof.StopCPUProfile()
	var wg sync.WaitGroup
	for g := range 200 {
		wg.Go(func() {
			var last int64
			for i := range 20000 {
				v, ok := ClockGettime(clocks[g%len(clocks)])
				if !ok || v < last {
					t.Errorf("goroutine %d, reading %d: %d after %d (ok %v)", g, i, v, last, ok)
					return
				}
				last = v
			}
		})
	}
	wg.Wait()
}

// TestUnknownClockIsNotOK: a clock id the kernel refuses is an error from
// the vDSO's fallback system call, reported as not ok.
func TestUnknownClockIsNotOK(t *testing.T) {
	mustInit(t)
	if v, ok := ClockGettime(1 << 20); ok {
		t.Fatalf("clock 1<<20 read %d", v)
	}
}

func TestCheckRefusesABadFunction(t *testing.T) {
	mustInit(t)
	// An id no kernel knows: the check must fail rather than trust fn.
	if err := check(clockGettime, []int32{1 << 20}); err == nil {
		t.Fatal("check accepted a clock the vDSO cannot read")
	}
}

func BenchmarkClockGettime(b *testing.B) {
	if err := Init(clocks...); err != nil {
		b.Fatal(err)
	}
	b.Run("vdso", func(b *testing.B) {
		for b.Loop() {
			ClockGettime(unix.CLOCK_MONOTONIC_RAW)
		}
	})
	b.Run("syscall", func(b *testing.B) {
		var ts unix.Timespec
		for b.Loop() {
			_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts)
		}
	})
}

// The image is read only within the mapping /proc/self/maps shows at the
// vDSO's address; an address with no mapping starting there is refused.
func TestImageStaysInItsMapping(t *testing.T) {
	auxv, err := unix.Auxv()
	if err != nil {
		t.Fatal(err)
	}
	var base uintptr
	for _, kv := range auxv {
		if kv[0] == atSysinfoEHdr {
			base = kv[1]
		}
	}
	mapped, err := mappedLength(base)
	if err != nil || mapped == 0 {
		t.Fatalf("mapping at %#x: %d, %v", base, mapped, err)
	}
	image, err := imageAt(base)
	if err != nil || uint64(len(image)) > mapped {
		t.Fatalf("image of %d bytes in a mapping of %d: %v", len(image), mapped, err)
	}
	if _, err := mappedLength(base + 64); err == nil {
		t.Fatal("an address inside the mapping was taken for its start")
	}
}
