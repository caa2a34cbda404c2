package main

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/rs/zerolog"
	"github.com/tickcast/tickcast/mold"
)

// RerequestStats counts what the re-request server was asked and did. A
// request is counted once, under the first of these that applies.
type RerequestStats struct {
	// Requests counts the datagrams received.
	Requests uint64 `json:"requests"`
	// Rejected counts datagrams that are no MoldUDP64 request (not 20
	// bytes, sequence 0, count 0 or 0xFFFF): logged, not answered.
	Rejected uint64 `json:"rejected"`
	// OtherSession counts requests for another session: not answered.
	OtherSession uint64 `json:"other_session"`
	// Unanswered counts requests not answered on purpose
	// (--rerequest-off, --rerequest-stop-after).
	Unanswered uint64 `json:"unanswered"`
	// Beyond counts requests whose first sequence was not yet published:
	// not answered.
	Beyond uint64 `json:"beyond"`
	// Unavailable counts requests whose first sequence the store no longer
	// holds (--store-messages): not answered.
	Unavailable uint64 `json:"unavailable"`
	// Answered counts requests answered; AnsweredMessages and
	// AnswerPackets what the answers carried.
	Answered         uint64 `json:"answered"`
	AnsweredMessages uint64 `json:"answered_messages"`
	AnswerPackets    uint64 `json:"answer_packets"`
	// Garbage counts answers mangled on purpose (--rerequest-garbage).
	Garbage uint64 `json:"garbage"`
	// SendErrors counts answer packets the socket failed to send.
	SendErrors uint64 `json:"send_errors"`
}

// rerequestConfig configures the re-request server.
type rerequestConfig struct {
	Session mold.Session
	// MaxCount caps the messages one request is answered with; 0 answers
	// with one packet's worth (as many as fit MaxDatagram).
	MaxCount    int
	MaxDatagram int
	// Off makes the server receive and count requests but answer none;
	// StopAfter (0: never) does so from that long after the server starts.
	Off       bool
	StopAfter time.Duration
	// Garbage answers with malformed packets instead.
	Garbage bool
	Log     zerolog.Logger
}

// rerequestServer answers MoldUDP64 re-requests, received on a UDP unicast
// socket, with ordinary downstream packets of the session's messages sent
// back to the requester's address from the same socket.
type rerequestServer struct {
	cfg   rerequestConfig
	conn  *net.UDPConn
	st    *store
	b     *mold.Builder
	junk  []byte
	start time.Time
	stats RerequestStats // written by serve only; read after done
	done  chan struct{}
}

// listenRerequest opens the server's socket on addr and starts serving.
func listenRerequest(addr netip.AddrPort, cfg rerequestConfig, st *store) (*rerequestServer, error) {
	b, err := mold.NewBuilder(cfg.MaxDatagram)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	s := &rerequestServer{cfg: cfg, conn: conn, st: st, b: b, junk: make([]byte, 0, cfg.MaxDatagram+16),
		start: time.Now(), done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *rerequestServer) Addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close stops the server and returns its counters.
func (s *rerequestServer) Close() RerequestStats {
	s.conn.Close()
	<-s.done
	return s.stats
}

func (s *rerequestServer) serve() {
	defer close(s.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := s.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.cfg.Log.Warn().Err(err).Msg("re-request socket")
			continue
		}
		s.handle(buf[:n], from)
	}
}

// handle answers one request datagram from from.
func (s *rerequestServer) handle(b []byte, from netip.AddrPort) {
	s.stats.Requests++
	r, err := mold.ParseRequest(b)
	if err != nil {
		s.stats.Rejected++
		// Logged in full at first, then every 1000th, so a flood of
		// garbage cannot flood the log.
		if s.stats.Rejected <= 10 || s.stats.Rejected%1000 == 0 {
			s.cfg.Log.Warn().Err(err).Str("from", from.String()).Int("bytes", len(b)).
				Uint64("rejected", s.stats.Rejected).Msg("malformed re-request")
		}
		return
	}
	switch {
	case r.Session != s.cfg.Session:
		s.stats.OtherSession++
		s.cfg.Log.Debug().Str("from", from.String()).Str("session", r.Session.String()).Msg("re-request for another session ignored")
		return
	case s.cfg.Off || (s.cfg.StopAfter > 0 && time.Since(s.start) >= s.cfg.StopAfter):
		s.stats.Unanswered++
		return
	case r.Seq >= s.st.published.Load():
		s.stats.Beyond++
		return
	case r.Seq < s.st.oldest():
		s.stats.Unavailable++
		return
	}
	want := int(r.Count)
	if s.cfg.MaxCount > 0 {
		want = min(want, s.cfg.MaxCount)
	}
	seq, sent := r.Seq, 0
	for sent < want {
		s.b.Start(s.cfg.Session, seq)
		n := s.st.get(seq, func(msg []byte) bool { return sent+s.b.Count() < want && s.b.Add(msg) })
		if n == 0 {
			break
		}
		pkt := s.b.Finish()
		if s.cfg.Garbage {
			pkt = s.garble(pkt)
		}
		if _, err := s.conn.WriteToUDPAddrPort(pkt, from); err != nil {
			s.stats.SendErrors++
			s.cfg.Log.Warn().Err(err).Str("to", from.String()).Msg("re-request answer not sent")
			return
		}
		s.stats.AnswerPackets++
		sent += n
		seq += uint64(n)
		if s.cfg.MaxCount == 0 {
			break // one packet's worth
		}
	}
	s.stats.Answered++
	s.stats.AnsweredMessages += uint64(sent)
}

// garble returns a malformed version of answer pkt, a different fault each
// time in turn: a header cut short, a block running past the end, bytes
// after the last block, a heartbeat with a payload.
func (s *rerequestServer) garble(pkt []byte) []byte {
	kind := s.stats.Garbage % 4
	s.stats.Garbage++
	j := append(s.junk[:0], pkt...)
	switch kind {
	case 0:
		return j[:mold.HeaderLen-3]
	case 1:
		// The first block claims more bytes than the packet has.
		j[mold.HeaderLen], j[mold.HeaderLen+1] = 0xFF, 0xFF
		return j
	case 2:
		return append(j, 0xDE, 0xAD, 0xBE, 0xEF)
	default:
		mold.Header{Session: s.cfg.Session, Seq: 1, Count: 0}.Put(j)
		return j
	}
}
