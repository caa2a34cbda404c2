#include "textflag.h"

// func prefetchEvent(table, table2, bidEnd uintptr, bidLines int, askEnd uintptr, askLines int, inst uintptr)
//
// Straight-line: tableLines (3) lines from table and from table2 (table
// again when table2 is 0), and topLines (4) lines back from each side's
// end, the last line again where a side has fewer (the table's line
// where it has none). A loop's exit would be mispredicted as often as
// the sides' sizes vary.
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

	MOVQ	bidEnd+16(FP), AX
	MOVQ	bidLines+24(FP), CX
	DECQ	AX
	TESTQ	CX, CX
	CMOVQEQ	R8, AX
	PREFETCHT0	(AX)
	LEAQ	-64(AX), BX
	CMPQ	CX, $2
	CMOVQLT	AX, BX
	PREFETCHT0	(BX)
	LEAQ	-64(BX), DX
	CMPQ	CX, $3
	CMOVQLT	BX, DX
	PREFETCHT0	(DX)
	LEAQ	-64(DX), SI
	CMPQ	CX, $4
	CMOVQLT	DX, SI
	PREFETCHT0	(SI)

	MOVQ	askEnd+32(FP), AX
	MOVQ	askLines+40(FP), CX
	DECQ	AX
	TESTQ	CX, CX
	CMOVQEQ	R8, AX
	PREFETCHT0	(AX)
	LEAQ	-64(AX), BX
	CMPQ	CX, $2
	CMOVQLT	AX, BX
	PREFETCHT0	(BX)
	LEAQ	-64(BX), DX
	CMPQ	CX, $3
	CMOVQLT	BX, DX
	PREFETCHT0	(DX)
	LEAQ	-64(DX), SI
	CMPQ	CX, $4
	CMOVQLT	DX, SI
	PREFETCHT0	(SI)
	RET
