package vdso

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// clockGettime is the address of __vdso_clock_gettime, 0 until Init
// found and checked it, or if it failed.
var clockGettime uintptr

var initOnce sync.Once

// initErr is why the vDSO is not used, if it is not.
var initErr error

// callClockGettime calls the vDSO function at fn as the C function
// int clock_gettime(clockid_t id, struct timespec *ts), on a stack of its
// own frame (call_linux_amd64.s).
//
//go:noescape
func callClockGettime(fn uintptr, id int32, ts *unix.Timespec) int64

// Init finds __vdso_clock_gettime and checks it against the system call
// for the given clocks; it runs once, and ClockGettime calls it. Its
// error says why readings use the system call.
func Init(clocks ...int32) error {
	initOnce.Do(func() {
		fn, err := lookup()
		if err == nil {
			err = check(fn, clocks)
		}
		if err != nil {
			initErr = fmt.Errorf("vdso: %w", err)
			return
		}
		clockGettime = fn
	})
	return initErr
}

// ClockGettime reads clock id through the vDSO, in nanoseconds. ok is
// false when the vDSO is not used (Init's error says why) or the call
// failed; the caller then reads the clock with the system call.
func ClockGettime(id int32) (ns int64, ok bool) {
	fn := clockGettime
	if fn == 0 {
		return 0, false
	}
	var ts unix.Timespec
	if callClockGettime(fn, id, &ts) != 0 {
		return 0, false
	}
	return ts.Nano(), true
}

// check reads each clock through fn between two system-call readings, a
// few times, and requires every vDSO reading to fall between them.
func check(fn uintptr, clocks []int32) error {
	for _, id := range clocks {
		for range 16 {
			var before, ts, after unix.Timespec
			if err := unix.ClockGettime(id, &before); err != nil {
				return fmt.Errorf("clock %d: system call: %w", id, err)
			}
			if r := callClockGettime(fn, id, &ts); r != 0 {
				return fmt.Errorf("clock %d: __vdso_clock_gettime returned %d", id, r)
			}
			if err := unix.ClockGettime(id, &after); err != nil {
				return fmt.Errorf("clock %d: system call: %w", id, err)
			}
			if ts.Nano() < before.Nano() || ts.Nano() > after.Nano() {
				return fmt.Errorf("clock %d: vDSO reading %d outside the system calls' [%d, %d]", id, ts.Nano(), before.Nano(), after.Nano())
			}
		}
	}
	return nil
}

// atSysinfoEHdr is the auxiliary vector's key for the vDSO's address
// (AT_SYSINFO_EHDR in <elf.h>).
const atSysinfoEHdr = 33

// maxImage bounds the vDSO image read: the kernel's is two to four pages.
const maxImage = 1 << 16

// lookup finds __vdso_clock_gettime (version LINUX_2.6, as the runtime's
// own lookup) in the vDSO the kernel mapped at AT_SYSINFO_EHDR.
func lookup() (uintptr, error) {
	auxv, err := unix.Auxv()
	if err != nil {
		return 0, fmt.Errorf("auxiliary vector: %w", err)
	}
	var base uintptr
	for _, kv := range auxv {
		if kv[0] == atSysinfoEHdr {
			base = kv[1]
		}
	}
	if base == 0 {
		return 0, errors.New("no vDSO mapped (no AT_SYSINFO_EHDR)")
	}
	image, err := imageAt(base)
	if err != nil {
		return 0, err
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return 0, fmt.Errorf("vDSO image: %w", err)
	}
	var load *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			load = p
			break
		}
	}
	if load == nil {
		return 0, errors.New("vDSO image has no PT_LOAD segment")
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("vDSO symbols: %w", err)
	}
	for _, s := range syms {
		if s.Name != "__vdso_clock_gettime" || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
			continue
		}
		if s.Version != "" && s.Version != "LINUX_2.6" {
			continue
		}
		if s.Value < load.Vaddr || s.Value-load.Vaddr >= load.Memsz {
			return 0, fmt.Errorf("__vdso_clock_gettime at %#x outside the loaded segment", s.Value)
		}
		return base + uintptr(load.Off) + uintptr(s.Value-load.Vaddr), nil
	}
	return 0, errors.New("vDSO exports no __vdso_clock_gettime")
}

// imageAt copies the vDSO's ELF image from memory: its header gives the
// image's length (the section headers come last in the file the kernel
// maps whole).
func imageAt(base uintptr) ([]byte, error) {
	mapped, err := mappedLength(base)
	if err != nil {
		return nil, err
	}
	if mapped < 64 {
		return nil, fmt.Errorf("vDSO mapping of %d bytes", mapped)
	}
	mem := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&base))), 64)
	var hdr elf.Header64
	if err := readHeader(mem, &hdr); err != nil {
		return nil, err
	}
	end := hdr.Shoff + uint64(hdr.Shnum)*uint64(hdr.Shentsize)
	if ph := hdr.Phoff + uint64(hdr.Phnum)*uint64(hdr.Phentsize); ph > end {
		end = ph
	}
	if end < 64 || end > maxImage || end > mapped {
		return nil, fmt.Errorf("vDSO image of %d bytes (headers say), not in [64, %d] or beyond its mapping of %d", end, maxImage, mapped)
	}
	return bytes.Clone(unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&base))), int(end))), nil
}

// mappedLength is the length of the mapping that starts at base, from
// /proc/self/maps: the image is read only within it, so that headers that
// say otherwise cannot send the read past the mapped pages.
func mappedLength(base uintptr) (uint64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("the vDSO's mapping: %w", err)
	}
	for line := range strings.Lines(string(maps)) {
		span, _, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(span, "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && start == uint64(base) && end > start {
			return end - start, nil
		}
	}
	return 0, fmt.Errorf("no mapping at the vDSO's address %#x in /proc/self/maps", base)
}

func readHeader(mem []byte, hdr *elf.Header64) error {
	if !bytes.HasPrefix(mem, []byte(elf.ELFMAG)) || elf.Class(mem[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(mem[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return errors.New("vDSO is not a little-endian 64-bit ELF image")
	}
	return binary.Read(bytes.NewReader(mem), binary.LittleEndian, hdr)
}
