#include "textflag.h"

// func prefetchBack(end uintptr, lines int)
TEXT ·prefetchBack(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	end+0(FP), AX
	MOVQ	lines+8(FP), CX
	DECQ	AX
loop:
	TESTQ	CX, CX
	JLE	done
	PREFETCHT0	(AX)
	SUBQ	$64, AX
	DECQ	CX
	JMP	loop
done:
	RET

// func prefetchFwd(start uintptr, lines int)
TEXT ·prefetchFwd(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ	start+0(FP), AX
	MOVQ	lines+8(FP), CX
fwd:
	TESTQ	CX, CX
	JLE	fwddone
	PREFETCHT0	(AX)
	ADDQ	$64, AX
	DECQ	CX
	JMP	fwd
fwddone:
	RET
