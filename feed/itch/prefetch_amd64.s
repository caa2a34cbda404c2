#include "textflag.h"
#include "go_asm.h"

// HOME puts the address of the home slot (Books.home) of the reference
// at off in the message into dst: ((ref>>run)*φ>>shift + ref&runMask) &
// mask, times slot__size (16), plus the table's start.
#define HOME(off, dst) \
	MOVQ	off(SI), AX; \
	BSWAPQ	AX; \
	MOVQ	AX, R9; \
	MOVBQZX	Books_run(BX), CX; \
	SHRQ	CX, R9; \
	MOVQ	$-7046029254386353131, R10; \
	IMULQ	R10, R9; \
	MOVBQZX	Books_shift(BX), CX; \
	SHRQ	CX, R9; \
	ANDQ	Books_runMask(BX), AX; \
	ADDQ	AX, R9; \
	ANDQ	Books_mask(BX), R9; \
	SHLQ	$4, R9; \
	MOVQ	Books_slots(BX), dst; \
	ADDQ	R9, dst

// ORDEREVENT jumps to skip unless the message at SI, of CX bytes, is an
// order event (touchKinds) of its type's length; it leaves its kind in
// DX. A message whose length does not match its type is handle's to
// report; every order event is long enough for what touch reads.
#define ORDEREVENT(skip) \
	TESTQ	CX, CX; \
	JEQ	skip; \
	MOVBQZX	(SI), AX; \
	LEAQ	·touchKinds(SB), R9; \
	MOVBQZX	(R9)(AX*1), DX; \
	TESTQ	DX, DX; \
	JEQ	skip; \
	LEAQ	·sizes(SB), R9; \
	MOVBQZX	(R9)(AX*1), R9; \
	CMPQ	R9, CX; \
	JNE	skip

// LOCATE puts the stock locate of the message at SI in R11.
#define LOCATE \
	MOVWQZX	1(SI), R11; \
	ROLW	$8, R11; \
	MOVWQZX	R11, R11

// BOOK puts the address of the entry in Books.books of stock R11 (BX the
// Books) in dst, or jumps to skip if the stock has none; tmp is scratch.
#define BOOK(dst, tmp, skip) \
	CMPQ	R11, Books_books+8(BX); \
	JCC	skip; \
	MOVQ	Books_books(BX), dst; \
	LEAQ	(R11)(R11*2), tmp; \
	SHLQ	$4, tmp; \
	ADDQ	tmp, dst

// SIDE fetches the topLines (4) cache lines that end a side of len levels
// (Level__size, 16 bytes) at ptr, where its best levels are: the line of
// its last byte and the three before it, each no lower than its start
// (where the side is shorter, the lowest line inside it again); the table's line
// (R8) for a side without levels. No branch: sides' lengths vary.
#define SIDE(ptr, len) \
	SHLQ	$4, len; \
	LEAQ	-1(ptr)(len*1), AX; \
	TESTQ	len, len; \
	CMOVQEQ	R8, AX; \
	CMOVQEQ	R8, ptr; \
	FETCH(0(AX)); \
	LEAQ	-64(AX), R9; \
	CMPQ	R9, ptr; \
	CMOVQCS	AX, R9; \
	FETCH(0(R9)); \
	LEAQ	-64(R9), AX; \
	CMPQ	AX, ptr; \
	CMOVQCS	R9, AX; \
	FETCH(0(AX)); \
	LEAQ	-64(AX), R9; \
	CMPQ	R9, ptr; \
	CMOVQCS	AX, R9; \
	FETCH(0(R9))

// func touchEvent(s *Source, p *byte, n int, q *byte, m int)
#define FETCH(a) PREFETCHT0 a
TEXT ·touchEvent(SB), NOSPLIT|NOFRAME, $0-40
#include "touch_amd64.h"
#undef FETCH

// func touchLines(s *Source, p *byte, n int, q *byte, m int, out *[touchMax]uintptr)
#define FETCH(a) LEAQ a, CX; MOVQ CX, (DI); ADDQ $8, DI
TEXT ·touchLines(SB), NOSPLIT|NOFRAME, $0-48
	MOVQ	out+40(FP), DI
#include "touch_amd64.h"
