//go:build linux

package edict

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edictlog/edictlog/internal/vdso"
)

// SystemClock is the real clock of docs/protocol.md, "Clocks" on Linux. Readings come from
// CLOCK_MONOTONIC_RAW: the oscillator's own rate, never slewed by NTP or
// chrony (which may slew CLOCK_MONOTONIC by several percent) and never
// stepped, so the drift bound ρ of eq. 15 is a property of the hardware.
// RAW stops while the host is suspended, which is safe for a granter (it
// only holds grants longer) but not for a leader; Suspended detects it by
// comparing RAW with CLOCK_BOOTTIME, which counts suspended time.
type SystemClock struct {
	incarnation uint64
	rho         float64
	slack       time.Duration

	mu       sync.Mutex
	last     int64 // last raw reading returned, for strictness
	baseRaw  int64 // raw and boot readings at the last check
	baseBoot int64
	jumpAt   Time // first reading after a detected suspend
}

// NewSystemClock returns the Linux clock for one incarnation. rho is the
// drift budget: BOOTTIME running ahead of RAW by more than rho (plus a
// small fixed slack for reading the two clocks at slightly different
// instants) counts as a suspend.
func NewSystemClock(incarnation uint64, rho float64) (*SystemClock, error) {
	if incarnation == 0 {
		return nil, fmt.Errorf("edict: system clock: incarnation must be positive (bump it in stable storage first)")
	}
	if rho < 0 || rho >= 1 {
		return nil, fmt.Errorf("edict: system clock: rho %g outside [0, 1)", rho)
	}
	// An error leaves the system calls in use; SystemClockPath says why.
	_ = vdso.Init(unix.CLOCK_MONOTONIC_RAW, unix.CLOCK_BOOTTIME)
	if _, err := readClock(unix.CLOCK_MONOTONIC_RAW); err != nil {
		return nil, err
	}
	if _, err := readClock(unix.CLOCK_BOOTTIME); err != nil {
		return nil, err
	}
	raw, boot := readPair()
	return &SystemClock{incarnation: incarnation, rho: rho, slack: time.Millisecond, last: raw - 1, baseRaw: raw, baseBoot: boot}, nil
}

// SystemClockPath says how SystemClock reads its clocks: "vdso", or
// "syscall" beside the reason the vDSO is not used (a platform other than
// linux/amd64, a kernel without one, or one whose readings failed the
// check against the system call). Either path reads the same kernel clock.
func SystemClockPath() (path string, why error) {
	if err := vdso.Init(unix.CLOCK_MONOTONIC_RAW, unix.CLOCK_BOOTTIME); err != nil {
		return "syscall", err
	}
	return "vdso", nil
}

// readClock reads clock id through the vDSO where it can (internal/vdso:
// the same kernel clock without entering the kernel, about 30 ns against
// 400), else with the system call.
func readClock(id int32) (int64, error) {
	if ns, ok := vdso.ClockGettime(id); ok {
		return ns, nil
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, fmt.Errorf("edict: clock_gettime(%d): %w", id, err)
	}
	return ts.Nano(), nil
}

// pairGap bounds how far apart the RAW readings bracketing a BOOTTIME
// reading may be: a pair read further apart (the thread was preempted
// between the reads) is read again, so that a preemption is never taken
// for a suspend.
const pairGap = 50 * time.Microsecond

// readPair reads RAW and BOOTTIME as of the same instant, to within
// pairGap/2: BOOTTIME is read between two RAW readings and paired with
// their midpoint.
func readPair() (raw, boot int64) {
	for try := 0; ; try++ {
		r1 := mustRead(unix.CLOCK_MONOTONIC_RAW)
		b := mustRead(unix.CLOCK_BOOTTIME)
		r2 := mustRead(unix.CLOCK_MONOTONIC_RAW)
		if time.Duration(r2-r1) <= pairGap || try == 100 {
			return r2, b + (r2-r1)/2
		}
	}
}

func mustRead(id int32) int64 {
	v, err := readClock(id)
	if err != nil {
		// clock_gettime on these clocks cannot fail on Linux ≥ 2.6.28;
		// if it does, no reading is trustworthy.
		panic(err)
	}
	return v
}

// Now implements Clock.
//
// The pair is read under the lock. Read before it, two goroutines racing
// for the lock could apply their pairs out of order: the later pair's RAW
// became the base and the earlier pair's BOOTTIME was paired with it, so
// the next reading found BOOTTIME ahead of RAW by however long the loser
// had waited, and a preemption of a millisecond there was taken for a
// suspend. A leader then gave up a healthy lease ("the clock was suspended
// while leading"): the Jepsen gray-failure nemeses found it on a busy host
// (TestNoFalseSuspendUnderConcurrentReaders).
func (c *SystemClock) Now() Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw, boot := readPair()
	if raw <= c.last {
		raw = c.last + 1
	}
	c.last = raw
	now := Time{Incarnation: c.incarnation, Nanos: raw}
	dRaw, dBoot := raw-c.baseRaw, boot-c.baseBoot
	if time.Duration(dBoot-dRaw) > time.Duration(float64(dRaw)*c.rho)+c.slack {
		c.jumpAt = now
	}
	c.baseRaw, c.baseBoot = raw, boot
	return now
}

// Suspended implements Clock, as of the latest reading: every Now reads
// the pair and records a jump, so a caller that just read the clock needs
// no second pair. It did read one, and the pairs' system calls were a
// third of a busy leader's CPU (docs/benchmarks.md).
func (c *SystemClock) Suspended(since Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.jumpAt.IsZero() && since.Before(c.jumpAt)
}
