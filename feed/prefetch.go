package feed

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
)

// Prefetch is a Source that reads another on a goroutine of its own, ahead
// of its consumer, into a ring of messages: the source's work (decoding,
// order books, normalization) runs beside the consumer's (a publisher
// sequencing and sending), on another core, as a pipeline. The ring is a
// single-producer single-consumer ring of preallocated messages with two
// atomic counters: no lock and no allocation per message. A side that finds
// the ring empty (the consumer) or full (the producer) spins briefly, then
// sleeps on a channel the other side signals only when told someone sleeps:
// the consumer once prefetchBatch messages are ready (or within
// PrefetchIdle, when it looks again by itself), the producer once half the
// ring is free.
//
// Next returns the source's messages in order, then its final error (io.EOF
// at the end). It never blocks longer than PrefetchIdle: with nothing
// ready by then it returns ErrIdle, so a publisher keeps its heartbeats
// going while a slow source thinks. The source's own ErrIdle is not passed
// on: the producer calls Next again.
//
// A Prefetch reads ahead, so what it has read is not yet what its consumer
// has taken: use it where that does not matter, at full speed from a file.
// Close stops the producer and waits for it; the source is then the
// caller's again (its counters can be read).
type Prefetch struct {
	src  Source
	ring []Msg
	mask uint64

	// head counts the messages written (the producer's), tail those taken
	// (the consumer's). Each counter and each side's flag has a cache line
	// of its own, and each side keeps its last reading of the other's
	// counter, reading it again only when the ring looks full or empty:
	// otherwise the two cores would trade the line on every message.
	_             [64]byte
	head          atomic.Uint64
	cachedTail    uint64 // the producer's
	_             [48]byte
	tail          atomic.Uint64
	cachedHead    uint64 // the consumer's
	_             [48]byte
	consumerWaits atomic.Bool
	_             [63]byte
	producerWaits atomic.Bool
	_             [63]byte

	// err is the source's final error, written before done is set.
	err  error
	done atomic.Bool

	// A side about to sleep sets its flag, checks again, and sleeps on
	// its channel (capacity 1); the other side signals when the flag is
	// set.
	wakeConsumer, wakeProducer chan struct{}

	stop   chan struct{}
	exited chan struct{}
	idle   *time.Timer
}

// PrefetchIdle is the longest Prefetch.Next waits for a message before it
// returns ErrIdle.
const PrefetchIdle = time.Millisecond

// prefetchSpins is how many times the consumer polls an empty ring before
// it sleeps.
const prefetchSpins = 200

// prefetchBatch is how many messages the producer makes ready before it
// wakes a sleeping consumer.
const prefetchBatch = 64

// NewPrefetch starts reading src into a ring of slots messages (rounded up
// to a power of two, at least 64).
func NewPrefetch(src Source, slots int) *Prefetch {
	n := 64
	for n < slots {
		n *= 2
	}
	p := &Prefetch{
		src: src, ring: make([]Msg, n), mask: uint64(n - 1),
		wakeConsumer: make(chan struct{}, 1), wakeProducer: make(chan struct{}, 1),
		stop: make(chan struct{}), exited: make(chan struct{}),
		idle: time.NewTimer(time.Hour),
	}
	p.idle.Stop()
	go p.produce()
	return p
}

// errClosed ends the producer when Close is called.
var errClosed = errors.New("feed: prefetch closed")

// produce reads the source into the ring until it ends or Close.
func (p *Prefetch) produce() {
	defer close(p.exited)
	var err error
	for err == nil {
		head := p.head.Load()
		if head-p.cachedTail > p.mask {
			if p.cachedTail = p.tail.Load(); head-p.cachedTail > p.mask {
				err = p.waitForRoom(head)
				continue
			}
		}
		e := p.src.Next(&p.ring[head&p.mask])
		switch {
		case e == nil:
			p.head.Store(head + 1)
			// A waiting consumer is woken once a batch is ready, not for
			// every message: a futex call a message would cost both
			// sides more than the source's work. (It also looks by
			// itself every PrefetchIdle.)
			if (head+1)%prefetchBatch == 0 && p.consumerWaits.Load() {
				signal(p.wakeConsumer)
			}
		case e == ErrIdle:
			if p.consumerWaits.Load() {
				signal(p.wakeConsumer) // what is ready, before the source waits again
			}
			select {
			case <-p.stop:
				err = errClosed
			default:
			}
		default:
			err = e
		}
	}
	p.err = err
	p.done.Store(true)
	signal(p.wakeConsumer)
}

// waitForRoom waits until the consumer has freed half the ring, or Close.
// It does not spin: the consumer wakes it, so sleeping costs one futex
// call per half ring.
func (p *Prefetch) waitForRoom(head uint64) error {
	p.producerWaits.Store(true)
	defer p.producerWaits.Store(false)
	if p.cachedTail = p.tail.Load(); head-p.cachedTail <= p.mask {
		return nil
	}
	select {
	case <-p.wakeProducer:
		return nil
	case <-p.stop:
		return errClosed
	}
}

// signal wakes the side sleeping on c, if it is not already woken.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Next implements Source.
func (p *Prefetch) Next(m *Msg) error {
	tail := p.tail.Load()
	if tail == p.cachedHead {
		if p.cachedHead = p.head.Load(); tail == p.cachedHead {
			if err := p.wait(tail); err != nil {
				return err
			}
		}
	}
	*m = p.ring[tail&p.mask]
	p.tail.Store(tail + 1)
	// A producer waiting for room is woken once half the ring is free,
	// not for every message taken: a producer faster than its consumer
	// would otherwise sleep and wake once a message.
	if p.producerWaits.Load() && p.cachedHead-(tail+1) <= p.mask/2 {
		signal(p.wakeProducer)
	}
	return nil
}

// wait waits until message tail is in the ring, and returns nil; or
// returns the source's final error once every message before it was
// taken, or ErrIdle after PrefetchIdle.
func (p *Prefetch) wait(tail uint64) (err error) {
	defer func() { p.cachedHead = p.head.Load() }()
	for range prefetchSpins {
		if tail != p.head.Load() {
			return nil
		}
	}
	p.consumerWaits.Store(true)
	defer p.consumerWaits.Store(false)
	p.idle.Reset(PrefetchIdle)
	defer p.idle.Stop()
	for {
		if tail != p.head.Load() {
			return nil
		}
		if p.done.Load() {
			// done is set after the last head: look once more.
			if tail != p.head.Load() {
				return nil
			}
			if p.err == errClosed {
				return io.EOF
			}
			return p.err
		}
		select {
		case <-p.wakeConsumer:
		case <-p.idle.C:
			if tail != p.head.Load() {
				return nil // fewer than a batch, ready a while
			}
			return ErrIdle
		}
	}
}

// Close stops reading the source and waits until the producer has stopped.
// Messages read and not taken are dropped. Close is idempotent; Next after
// Close returns the messages still in the ring, then io.EOF (or the
// source's error if it had ended).
func (p *Prefetch) Close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.exited
}
