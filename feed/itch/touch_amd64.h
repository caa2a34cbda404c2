// The body of touchEvent and touchLines (prefetch_amd64.s), which differ
// in FETCH, what they do with each cache line (touchLines stores it at DI
// and moves on).
//
// First the book of the stock of the message just read (q, m), whose
// event is touched eventAhead messages later: the lines of its entry in
// Books.books, which holds its sides' addresses and lengths. Registers:
// SI the message, CX its length, DX its kind, R11 its stock locate, BX
// the Books, AX and R9 scratch.
	MOVQ	q+24(FP), SI
	MOVQ	m+32(FP), CX
	ORDEREVENT(event)
	MOVQ	s+0(FP), BX
	MOVQ	Source_books(BX), BX
	LOCATE
	BOOK(R9, AX, event)
	FETCH(0(R9))
	FETCH((book__size-1)(R9))
event:

// Then the event of the message eventAhead before its turn (p, n).
// Registers: SI the message, CX its length, then scratch (shift counts,
// the add's side, and FETCH's in touchLines); DX the kind (touchKinds);
// BX the Books; R10 the Source until its fields are loaded, then HOME's
// multiplier, then the book (load nothing through it as the Source after
// the first HOME); R12 and R13 the instrument states and their count, then
// the bids; R11 the stock locate, then the asks' length; R14 a replace's
// second home slot, then the asks' start; R8 the home slot of the
// reference; AX and R9 scratch.

	MOVQ	s+0(FP), R10
	MOVQ	p+8(FP), SI
	MOVQ	n+16(FP), CX
	ORDEREVENT(done)
	MOVQ	Source_books(R10), BX
	MOVQ	Source_inst(R10), R12
	MOVQ	Source_inst+8(R10), R13

	// The stock's state, if it has any yet.
	LOCATE
	CMPQ	R11, R13
	JCC	noinst
	LEAQ	(R11)(R11*4), R9
	LEAQ	(R12)(R9*8), R9
	FETCH(0(R9))
noinst:

	// The order table from the reference's home slot on (Books.home),
	// and from a replace's new reference's.
	HOME(11, R8)
	FETCH(0(R8))
	FETCH(64(R8))
	CMPQ	DX, $4
	JNE	noreplace
	HOME(19, R14)
	FETCH(0(R14))
	FETCH(64(R14))
noreplace:

	// The book's sides: an add's own, or both for an event whose side is
	// its order's. An add's side byte is read at 19, other events' type
	// byte at 0 (which is never 'B'), and the other side's length zeroed
	// by CMOVs: the side is as random as the feed, a branch on it would
	// be mispredicted half the time.
	BOOK(R10, R9, done)
	MOVQ	DX, R9
	ANDQ	$1, R9 // an add
	MOVQ	R9, AX
	NEGQ	AX
	ANDQ	$19, AX
	MOVBQZX	(SI)(AX*1), AX
	CMPB	AX, $66 // 'B'
	SETEQ	CX
	MOVBQZX	CX, CX
	ANDQ	R9, CX // an add to the bids: no asks
	SUBQ	CX, R9 // an add to the asks: no bids
	MOVQ	book_sides(R10), R12
	MOVQ	book_sides+8(R10), R13
	MOVQ	book_sides+24(R10), R14
	MOVQ	book_sides+32(R10), R11
	XORL	AX, AX
	TESTQ	R9, R9
	CMOVQNE	AX, R13
	TESTQ	CX, CX
	CMOVQNE	AX, R11
	SIDE(R12, R13)
	SIDE(R14, R11)
done:
	RET
