package upstream

import (
	"net"
	"net/netip"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seqgap"
)

// chunk is one request of at most MaxCount messages: waiting to be sent, or
// sent and waiting for its answer.
type chunk struct {
	session  mold.Session
	from, to uint64
	sentNs   int64
	tries    int // times sent
}

// requester turns the tracker's requests into MoldUDP64 request packets to
// the re-request server, and keeps track of their answers.
type requester struct {
	conn     *net.UDPConn
	server   netip.AddrPort
	maxCount uint64
	timeout  int64
	retries  int
	inFlight int
	queue    []chunk // not sent yet from head on, oldest first
	head     int
	out      []chunk // sent, not yet answered in full
	refuse   []chunk // given up, to be refused to the tracker
	pkt      []byte
	stats    *Stats
	onError  func(error)
}

func newRequester(conn *net.UDPConn, cfg Config, stats *Stats) *requester {
	return &requester{conn: conn, server: cfg.Rerequest, maxCount: uint64(cfg.MaxCount), timeout: int64(cfg.Timeout),
		retries: cfg.Retries, inFlight: cfg.InFlight, pkt: make([]byte, 0, mold.RequestLen), stats: stats, onError: cfg.OnError}
}

// serve takes the tracker's new requests, resends or gives up what timed
// out, and sends what the in-flight limit allows.
func (q *requester) serve(tr *seqgap.Tracker, now int64, f *Feed) {
	queries := 0
	for _, r := range tr.Requests() {
		if r.Query {
			// A MoldUDP64 re-request server cannot tell which session the
			// group carries: the tracker follows the one it meets.
			queries++
			continue
		}
		// A late join's prefix (Snapshot) is replayed like any range.
		for from := r.Range.From; from != 0 && from <= r.Range.To; from += q.maxCount {
			q.queue = append(q.queue, chunk{session: r.Session, from: from, to: min(r.Range.To, from+q.maxCount-1)})
		}
	}
	if queries > 0 {
		tr.Answer(seqgap.Answer{Outcome: seqgap.AnswerSession}, now, f)
	}
	session, _ := tr.Session()
	next := tr.Next()
	keep := q.out[:0]
	for _, c := range q.out {
		switch {
		case c.session != session || c.to < next:
			// Filled meanwhile (the other line, another answer) or of a
			// session no longer followed: nothing to wait for.
		case now-c.sentNs < q.timeout:
			keep = append(keep, c)
		case c.tries <= q.retries:
			q.stats.Retries++
			q.send(&c, now)
			keep = append(keep, c)
		case c.from >= tr.High():
			// A probe past the known end of a silent stream: no answer
			// means nothing more was published.
		default:
			q.stats.GaveUp++
			q.refuse = append(q.refuse, c)
		}
	}
	q.out = keep
	for len(q.out) < q.inFlight && q.head < len(q.queue) {
		c := q.queue[q.head]
		q.head++
		if c.session != session || c.to < next {
			continue
		}
		c.from = max(c.from, next)
		q.send(&c, now)
		q.out = append(q.out, c)
	}
	if q.head == len(q.queue) {
		q.queue, q.head = q.queue[:0], 0 // all sent: reuse from the start
	}
	for _, c := range q.refuse {
		if q.onError != nil {
			q.onError(&GiveUpError{Server: q.server, Session: c.session, Range: seqgap.Range{From: c.from, To: c.to}, Tries: c.tries})
		}
		tr.Answer(seqgap.Answer{Outcome: seqgap.AnswerRefused, Session: c.session, Range: seqgap.Range{From: c.from, To: c.to}}, now, f)
	}
	q.refuse = q.refuse[:0]
}

// send sends c's request (again).
func (q *requester) send(c *chunk, now int64) {
	q.pkt = mold.Request{Session: c.session, Seq: c.from, Count: uint16(c.to - c.from + 1)}.Append(q.pkt[:0])
	c.sentNs = now
	c.tries++
	q.stats.Requests++
	// A failed send is a request lost: the timeout sends it again.
	_, _ = q.conn.WriteToUDPAddrPort(q.pkt, q.server)
}

// answered takes an answer packet: the requests whose start it covers move
// on past it, and what they still want is asked for at once.
func (q *requester) answered(p mold.Packet, now int64) {
	end := p.Seq + uint64(p.Messages())
	for i := 0; i < len(q.out); i++ {
		c := &q.out[i]
		if c.session != p.Session || c.from < p.Seq || c.from >= end {
			continue
		}
		c.from = end
		if c.from > c.to {
			q.out = append(q.out[:i], q.out[i+1:]...)
			i--
			continue
		}
		c.tries = 0 // the server answers: the rest is a new request
		q.send(c, now)
	}
}

// due returns when the oldest outstanding request times out.
func (q *requester) due() (int64, bool) {
	if len(q.out) == 0 {
		return 0, false
	}
	d := q.out[0].sentNs
	for _, c := range q.out[1:] {
		d = min(d, c.sentNs)
	}
	return d + q.timeout, true
}
