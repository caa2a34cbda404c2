package main

import (
	"sync"
	"sync/atomic"
)

// chunkMessages is how many messages one store chunk holds; the store
// drops whole chunks, oldest first.
const chunkMessages = 4096

// chunk holds chunkMessages messages back to back, ends[i] being where
// message i ends in data.
type chunk struct {
	data []byte
	ends []uint32
}

// store keeps every message the exchange published, by sequence number, for
// the re-request server: up to limit messages (0: no limit), the oldest
// dropped first, a chunk at a time. The publisher appends; the re-request
// server reads concurrently. Published says how far requests may read:
// messages are appended as they go into a packet and become readable when
// the packet is sent.
type store struct {
	mu     sync.RWMutex
	first  uint64 // sequence of chunks[0]'s first message
	chunks []*chunk
	spare  *chunk // a dropped chunk, reused by the next one needed
	n      uint64 // messages held
	limit  uint64

	published atomic.Uint64 // the sequence after the last message sent
}

func newStore(limit uint64) *store {
	s := &store{first: 1, limit: limit}
	s.published.Store(1)
	return s
}

// add appends the message with the next sequence number. It allocates only
// when it starts a chunk and has no spare one.
func (s *store) add(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n%chunkMessages == 0 {
		c := s.spare
		s.spare = nil
		if c == nil {
			c = &chunk{data: make([]byte, 0, chunkMessages*48), ends: make([]uint32, 0, chunkMessages)}
		}
		c.data, c.ends = c.data[:0], c.ends[:0]
		s.chunks = append(s.chunks, c)
		if s.limit > 0 && s.n >= s.limit+chunkMessages {
			s.spare = s.chunks[0]
			s.chunks = append(s.chunks[:0], s.chunks[1:]...)
			s.first += chunkMessages
			s.n -= chunkMessages
		}
	}
	c := s.chunks[len(s.chunks)-1]
	c.data = append(c.data, msg...)
	c.ends = append(c.ends, uint32(len(c.data)))
	s.n++
}

// publish marks every message before seq as sent.
func (s *store) publish(seq uint64) { s.published.Store(seq) }

// oldest returns the sequence of the oldest message held.
func (s *store) oldest() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.first
}

// get calls f with each message from seq on, in order, while f returns
// true and there are published messages. It returns how many f took.
func (s *store) get(seq uint64, f func(msg []byte) bool) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	end := s.published.Load()
	n := 0
	for ; seq >= s.first && seq < end; seq++ {
		k := seq - s.first
		c := s.chunks[k/chunkMessages]
		i := k % chunkMessages
		start := uint32(0)
		if i > 0 {
			start = c.ends[i-1]
		}
		if !f(c.data[start:c.ends[i]]) {
			break
		}
		n++
	}
	return n
}
