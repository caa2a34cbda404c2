package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that writers on several goroutines (a
// logger called from NATS callbacks, a process's output copier) and a
// reading test may use at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns the contents.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Bytes returns a copy of the contents.
func (s *SyncBuffer) Bytes() []byte { return []byte(s.String()) }
