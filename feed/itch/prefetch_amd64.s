#include "textflag.h"

// func prefetch(addr uintptr)
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ	addr+0(FP), AX
	PREFETCHT0	(AX)
	RET

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
