package tickcast

import (
	"errors"
	"io"
	"testing"

	"github.com/tickcast/tickcast/feed"
)

// stampSource yields one message per recorded time, then err.
type stampSource struct {
	ns  []int64
	err error
	n   int
}

func (s *stampSource) Next(m *feed.Msg) error {
	if s.n == len(s.ns) {
		return s.err
	}
	*m = feed.Msg{Header: feed.Header{Type: feed.TypeTrade, Instrument: uint32(s.n), ExchangeNs: s.ns[s.n], RecvNs: 1}}
	s.n++
	return nil
}

// readAhead, Run's source under RunConfig.Speed, gives the pacer each
// message's recorded time before Next returns that same message, and passes
// on the source's end or error once the messages are out.
func TestReadAhead(t *testing.T) {
	for _, end := range []error{io.EOF, errors.New("input cut short")} {
		src := &stampSource{ns: []int64{5e12, 5e12 + 10, 5e12 + 10, 6e12}, err: end}
		r := &readAhead{src: src}
		var m feed.Msg
		for i, want := range src.ns {
			// Asked twice, as Run's wait loop does: the same message.
			for range 2 {
				if ns, ok := r.stamp(uint64(i)); !ok || ns != want {
					t.Fatalf("stamp %d: %d, %v; want %d, true", i, ns, ok, want)
				}
			}
			if err := r.Next(&m); err != nil || m.ExchangeNs != want || m.Instrument != uint32(i) {
				t.Fatalf("Next %d: %v, instrument %d at %d; want instrument %d at %d", i, err, m.Instrument, m.ExchangeNs, i, want)
			}
			if m.RecvNs < 1 {
				t.Errorf("Next %d: RecvNs %d moved back from 1", i, m.RecvNs)
			}
		}
		if _, ok := r.stamp(uint64(len(src.ns))); ok {
			t.Errorf("stamp past the end: ok")
		}
		if err := r.Next(&m); err != end {
			t.Errorf("Next past the end: %v, want %v", err, end)
		}
		// Without a stamp first, Next reads straight through.
		if err := (&readAhead{src: &stampSource{err: end}}).Next(&m); err != end {
			t.Errorf("Next of an empty source: %v, want %v", err, end)
		}
	}
}
