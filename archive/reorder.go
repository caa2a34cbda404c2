package archive

import (
	"errors"

	"github.com/tickcast/tickcast/mold"
)

// reorderWindow is how many records a replay holds back while it waits for
// one stored out of order: the records a recorder had awaiting
// acknowledgement (64) when a JetStream leader died, which the client
// stores again at the new leader after later ones.
const reorderWindow = 64

// reorder puts a source's records of each session back in sequence order.
// A record that starts past the messages the records before it covered
// (a hole) is held, and those after it too, until the record that fills
// the hole comes, or reorderWindow records are held, or the source ends or
// catches up with the stream: then the held records are given in order
// and the hole stays a gap. Loss records are holes filled.
type reorder struct {
	src  recordSource
	next map[mold.Session]uint64 // per session, the message after those given
	held []heldRecord
	end  error // the error that ended the source, given once the held are
}

// heldRecord is a record held back, with its own copy of the bytes.
type heldRecord struct {
	rec Record
	seq uint64
}

func newReorder(src recordSource) *reorder {
	return &reorder{src: src, next: map[mold.Session]uint64{}}
}

// Next returns the next record in order; see recordSource.
func (o *reorder) Next() (Record, uint64, error) {
	for {
		if i := o.ready(); i >= 0 {
			return o.give(i)
		}
		if o.end != nil {
			if len(o.held) > 0 {
				return o.give(o.oldest())
			}
			return Record{}, 0, o.end
		}
		rec, seq, err := o.src.Next()
		if err != nil && !errors.Is(err, ErrCorrupt) {
			if len(o.held) == 0 {
				return rec, seq, err
			}
			o.end = err
			continue
		}
		if err != nil {
			return rec, seq, err // a corrupt record: its messages are a gap
		}
		want, known := o.next[rec.Session]
		if !known || rec.First <= want {
			o.next[rec.Session] = max(want, rec.Next)
			if len(o.held) > 0 && o.src.AtTail() {
				// The held wait no longer: deliver them after this one.
				o.end = errCaughtUp
			}
			return rec, seq, nil
		}
		c := rec
		c.raw = append([]byte(nil), rec.raw...)
		c.body = c.raw[HeaderLen:]
		o.held = append(o.held, heldRecord{rec: c, seq: seq})
		if len(o.held) > reorderWindow || o.src.AtTail() {
			return o.give(o.oldest())
		}
	}
}

// errCaughtUp ends a wait for a record out of order when the source has
// nothing more pending; the source goes on.
var errCaughtUp = errors.New("caught up")

// ready returns the index of a held record now in order, or -1.
func (o *reorder) ready() int {
	if o.end == errCaughtUp && len(o.held) == 0 {
		o.end = nil
	}
	for i, h := range o.held {
		if want, ok := o.next[h.rec.Session]; ok && h.rec.First <= want {
			return i
		}
	}
	return -1
}

// oldest returns the index of the held record of the lowest first message.
func (o *reorder) oldest() int {
	k := 0
	for i, h := range o.held {
		if h.rec.First < o.held[k].rec.First {
			k = i
		}
	}
	return k
}

// give removes held record i and returns it, noting what it covers.
func (o *reorder) give(i int) (Record, uint64, error) {
	h := o.held[i]
	o.held = append(o.held[:i], o.held[i+1:]...)
	o.next[h.rec.Session] = max(o.next[h.rec.Session], h.rec.Next)
	if o.end == errCaughtUp && len(o.held) == 0 {
		o.end = nil
	}
	return h.rec, h.seq, nil
}

// stopWait passes to the source.
func (o *reorder) stopWait() { o.src.stopWait() }

// AtTail reports whether the source is at its tail and nothing is held.
func (o *reorder) AtTail() bool { return len(o.held) == 0 && o.src.AtTail() }

// Close closes the source.
func (o *reorder) Close() { o.src.Close() }

var _ recordSource = (*reorder)(nil)
