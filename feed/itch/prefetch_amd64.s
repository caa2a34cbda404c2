#include "textflag.h"

// PREFETCH_SIDE prefetches topLines (4) lines back from a side's end, the
// last line again where the side has fewer, and R8's line where it has
// none. A loop's exit would be mispredicted as often as sides' sizes vary.
#define PREFETCH_SIDE(end, lines) \
	MOVQ	end, AX; \
	MOVQ	lines, CX; \
	DECQ	AX; \
	TESTQ	CX, CX; \
	CMOVQEQ	R8, AX; \
	PREFETCHT0	(AX); \
	LEAQ	-64(AX), BX; \
	CMPQ	CX, $2; \
	CMOVQLT	AX, BX; \
	PREFETCHT0	(BX); \
	LEAQ	-64(BX), DX; \
	CMPQ	CX, $3; \
	CMOVQLT	BX, DX; \
	PREFETCHT0	(DX); \
	LEAQ	-64(DX), SI; \
	CMPQ	CX, $4; \
	CMOVQLT	DX, SI; \
	PREFETCHT0	(SI)

// func prefetchEvent(table, table2, bidEnd uintptr, bidLines int, askEnd uintptr, askLines int, inst uintptr)
//
// Straight-line: the line of inst, tableLines (3) lines from table and
// from table2 (table again when table2 is 0), and each side's lines
// (PREFETCH_SIDE, with table's line for a side of none).
TEXT ·prefetchEvent(SB), NOSPLIT|NOFRAME, $0-56
	MOVQ	inst+48(FP), AX
	PREFETCHT0	(AX)
	MOVQ	table+0(FP), R8
	PREFETCHT0	(R8)
	PREFETCHT0	64(R8)
	PREFETCHT0	128(R8)
	MOVQ	table2+8(FP), AX
	TESTQ	AX, AX
	CMOVQEQ	R8, AX
	PREFETCHT0	(AX)
	PREFETCHT0	64(AX)
	PREFETCHT0	128(AX)
	PREFETCH_SIDE(bidEnd+16(FP), bidLines+24(FP))
	PREFETCH_SIDE(askEnd+32(FP), askLines+40(FP))
	RET
