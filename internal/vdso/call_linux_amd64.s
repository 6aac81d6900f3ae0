#include "textflag.h"

// func callClockGettime(fn uintptr, id int32, ts *unix.Timespec) int64
//
// The frame reserves 8 KiB, which the prologue's stack check guarantees,
// and the C code runs with its stack pointer near the frame's top: its
// stack grows down through the frame, never past it. R12 is callee-saved
// in the C ABI and holds the Go stack pointer across the call; the
// stack is 16-byte aligned at the call, as the C ABI requires.
TEXT ·callClockGettime(SB), 0, $8192-32
	MOVQ	fn+0(FP), AX
	MOVL	id+8(FP), DI
	MOVQ	ts+16(FP), SI
	MOVQ	SP, R12
	ADDQ	$8160, SP
	ANDQ	$~15, SP
	CALL	AX
	MOVQ	R12, SP
	MOVQ	AX, ret+24(FP)
	RET
