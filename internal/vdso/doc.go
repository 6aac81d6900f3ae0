// Package vdso reads Linux clocks through the vDSO, the kernel's code
// mapped into every process, without entering the kernel.
//
// Go's runtime calls the vDSO only for CLOCK_MONOTONIC and CLOCK_REALTIME
// (time.Now). edict.SystemClock needs CLOCK_MONOTONIC_RAW and
// CLOCK_BOOTTIME, which golang.org/x/sys/unix reads with a system call
// (about 0.4 µs each on the 2-core test machine; three make a reading).
// ClockGettime reads them with __vdso_clock_gettime instead.
//
// Guarantees:
//   - A reading is the kernel's own: __vdso_clock_gettime reads the same
//     timekeeping data, with the same clocksource and scaling, as the
//     clock_gettime system call, and makes that system call itself for a
//     clock or clocksource it cannot read in user space. A clock's readings
//     through either path interleave in order (TestInterleavesWithSyscall).
//   - ok is false, and the caller makes the system call, on any platform
//     but linux/amd64, when the process has no vDSO or it exports no
//     __vdso_clock_gettime of version LINUX_2.6, and when the first
//     readings through it, taken at Init between two system-call readings,
//     do not fall between them.
//   - The call runs on the calling goroutine's stack, inside a frame that
//     reserves 8 KiB for the vDSO's own use: a kernel built with stack
//     probes and without inlining may use a page (Go issue 20427, the
//     reason the runtime switches to the system stack for its own call).
//     No Go code runs on the goroutine during the call, so its stack
//     cannot move, and a signal (the profiler's, a preemption request)
//     finds a PC outside Go code: the profiler books the sample to
//     external code, and the goroutine is not preempted there.
package vdso
