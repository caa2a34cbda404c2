package main

// The NATS core peer: an embedded nats-server in its own process (role
// nats-server), a paced publisher (nats-pub) sending one message per tick
// with the send stamp inside, and subscribers (nats-sub) recording the
// latency per message, the same way as the raw floor. For ping-pong,
// nats-echo answers requests and nats-ping times request/reply round trips.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/internal/hgrm"
	"github.com/tickcast/tickcast/internal/natsconn"
)

// natsReadyMark starts the nats-server role's readiness line on stderr; the
// client URL follows it.
const natsReadyMark = "tickbench nats-server: ready "

// natsFlags parses the flags of the NATS client roles.
type natsFlags struct {
	fs      *flag.FlagSet
	url     string
	subject string
	size    int
	chans   int
}

func newNATSFlags(role string) *natsFlags {
	f := &natsFlags{fs: flag.NewFlagSet(role, flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.fs.String("role", role, "")
	f.fs.StringVar(&f.url, "url", "", "NATS server URL (nats://127.0.0.1:PORT)")
	f.fs.StringVar(&f.subject, "subject", "tickbench.lat", "subject")
	f.fs.IntVar(&f.size, "size", 100, "payload bytes")
	f.fs.IntVar(&f.chans, "channels", 1, "nats-pub: subjects SUBJECT.0..SUBJECT.N-1, round robin; nats-sub: end markers to wait for")
	return f
}

func (f *natsFlags) parse(args []string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(f.url, "nats://127.0.0.1:") {
		return fmt.Errorf("--url %q: want nats://127.0.0.1:PORT", f.url)
	}
	if f.chans < 1 || f.chans > 32 {
		return fmt.Errorf("--channels %d: want 1..32", f.chans)
	}
	if f.size < stampLen || f.size > 65536 {
		return fmt.Errorf("--size %d: want %d..65536", f.size, stampLen)
	}
	return nil
}

func (f *natsFlags) connect(name string) (*nats.Conn, error) {
	nc, err := nats.Connect(f.url, nats.Name("tickbench "+name), nats.NoReconnect())
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", f.url, err)
	}
	return nc, nil
}

// natsServer is the nats-server role: an embedded server on a free port of
// 127.0.0.1 until SIGTERM, SIGINT or --max-life.
func natsServer(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("role", "nats-server", "")
	maxLife := fs.Duration("max-life", time.Minute, "shut down after this long at most")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	srv, err := natsconn.StartServer(natsconn.ServerConfig{Host: "127.0.0.1", Port: 0})
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, natsReadyMark+srv.ClientURL())
	select {
	case <-sig:
	case <-time.After(*maxLife):
	}
	srv.Shutdown()
	return json.NewEncoder(stdout).Encode(map[string]string{"url": srv.ClientURL()})
}

// natsPub is the nats-pub role: one message of --size bytes per tick at
// --rate on --subject, then end markers, then a flush.
func natsPub(args []string, stdout io.Writer) error {
	f := newNATSFlags("nats-pub")
	count := f.fs.Uint64("count", 0, "messages to publish")
	rate := f.fs.Float64("rate", 0, "messages per second (0: as fast as possible)")
	if err := f.parse(args); err != nil {
		return err
	}
	nc, err := f.connect("nats-pub")
	if err != nil {
		return err
	}
	defer nc.Close()
	buf := make([]byte, f.size)
	subjects := make([]string, f.chans)
	for ch := range subjects {
		subjects[ch] = f.subject + "." + strconv.Itoa(ch)
	}
	var rep latSendReport
	send := func(i uint64) error {
		putStamp(buf, i, time.Now().UnixNano())
		return nc.Publish(subjects[i%uint64(len(subjects))], buf)
	}
	if err := pacedSend(*rate, *count, &rep, send); err != nil {
		return err
	}
	var marker [stampLen]byte
	for ch, subj := range subjects {
		// Subject ch carried the sends i with i%channels == ch.
		n := rep.Sent / uint64(len(subjects))
		if uint64(ch) < rep.Sent%uint64(len(subjects)) {
			n++
		}
		putEnd(marker[:], n)
		if err := nc.Publish(subj, marker[:]); err != nil {
			return err
		}
	}
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return json.NewEncoder(stdout).Encode(&rep)
}

// natsSub is the nats-sub role: it subscribes to --subject, says "ready" on
// stderr once the server has the subscription, records each message's
// latency in its callback, and stops like lat-recv.
func natsSub(args []string, stdout, stderr io.Writer) error {
	f := newNATSFlags("nats-sub")
	expect := f.fs.Uint64("expect", 0, "stop once this many messages arrived (0: at the end marker)")
	idle := f.fs.Duration("idle", time.Second, "stop after this long without a message")
	startWait := f.fs.Duration("start", 10*time.Second, "stop if no message arrives within this long")
	hgrm := f.fs.String("hgrm", "", "write the latency histogram here (.hgrm, µs)")
	if err := f.parse(args); err != nil {
		return err
	}
	nc, err := f.connect("nats-sub")
	if err != nil {
		return err
	}
	defer nc.Close()
	r := &natsReceiver{split: newLatSplit(), expect: *expect, chans: f.chans, done: make(chan struct{})}
	sub, err := nc.Subscribe(f.subject, r.receive)
	if err != nil {
		return err
	}
	// A slow subscriber must show as loss, not as a client-side limit.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return err
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	fmt.Fprintln(stderr, "tickbench nats-sub: ready")
	reason := r.wait(*idle, *startWait)
	_ = sub.Unsubscribe()
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "expect" && r.rep.Ended > 0 && (*expect == 0 || r.rep.Received < *expect) {
		reason = "end-marker"
	}
	r.rep.Reason = reason
	r.rep.First, r.rep.Steady = statsOf(r.split.First), statsOf(r.split.Steady)
	return printLatReport(stdout, &r.rep, &r.rep.latStats, r.split.Whole(), *hgrm)
}

// natsReceiver is nats-sub's state, shared by the NATS client's callback
// and the role's wait for the end.
type natsReceiver struct {
	split  *hgrm.Split   // the latencies: first second and steady state (Whole: the run)
	expect uint64        // messages to stop at (0: at the end markers)
	chans  int           // end markers to stop at
	done   chan struct{} // closed once, at expect messages or chans end markers
	once   sync.Once

	mu   sync.Mutex
	rep  latRecvReport
	last time.Time // when the last data message arrived
}

// receive is the subscription's callback: it records a message's latency
// or counts an end marker.
func (r *natsReceiver) receive(m *nats.Msg) {
	now := time.Now()
	ns, end, announced := readStamp(m.Data)
	r.mu.Lock()
	defer r.mu.Unlock()
	if end {
		r.rep.Ended++
		r.rep.Announced += announced
		if r.rep.Ended >= r.chans {
			r.once.Do(func() { close(r.done) })
		}
		return
	}
	r.split.Record(now.UnixNano(), now.UnixNano()-ns)
	if r.rep.Received == 0 {
		r.rep.FirstNs = now.UnixNano()
	}
	r.rep.Received++
	r.rep.LastNs, r.last = now.UnixNano(), now
	if r.expect > 0 && r.rep.Received >= r.expect {
		r.once.Do(func() { close(r.done) })
	}
}

// wait returns why the receiving ended: "expect" when done was closed,
// "no-data" when nothing came within startWait, "idle-timeout" when
// nothing more came for idle.
func (r *natsReceiver) wait(idle, startWait time.Duration) string {
	begin := time.Now()
	tick := time.NewTicker(rcvTimeout)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return "expect"
		case <-tick.C:
			r.mu.Lock()
			received, last := r.rep.Received, r.last
			r.mu.Unlock()
			switch {
			case received == 0 && time.Since(begin) > startWait:
				return "no-data"
			case received > 0 && time.Since(last) > idle:
				return "idle-timeout"
			}
		}
	}
}

// natsEcho is the nats-echo role: it answers every request on --subject
// with the request's payload, until --max-life or SIGTERM.
func natsEcho(args []string, stdout, stderr io.Writer) error {
	f := newNATSFlags("nats-echo")
	maxLife := f.fs.Duration("max-life", time.Minute, "stop after this long at most")
	if err := f.parse(args); err != nil {
		return err
	}
	nc, err := f.connect("nats-echo")
	if err != nil {
		return err
	}
	defer nc.Close()
	var n uint64
	sub, err := nc.Subscribe(f.subject, func(m *nats.Msg) {
		n++
		_ = m.Respond(m.Data)
	})
	if err != nil {
		return err
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	fmt.Fprintln(stderr, "tickbench nats-echo: ready")
	select {
	case <-sig:
	case <-time.After(*maxLife):
	}
	_ = sub.Unsubscribe()
	return json.NewEncoder(stdout).Encode(map[string]uint64{"echoed": n})
}

// pingReport is a ping-pong pinger's JSON line.
type pingReport struct {
	Pings   uint64 `json:"pings"`
	Pongs   uint64 `json:"pongs"`
	Timeout uint64 `json:"timeouts"`
	latStats
}

// natsPing is the nats-ping role: --count request/reply round trips on
// --subject, back to back, timed on the monotonic clock.
func natsPing(args []string, stdout io.Writer) error {
	f := newNATSFlags("nats-ping")
	count := f.fs.Uint64("count", 10000, "round trips")
	hgrm := f.fs.String("hgrm", "", "write the round-trip histogram here (.hgrm, µs)")
	if err := f.parse(args); err != nil {
		return err
	}
	nc, err := f.connect("nats-ping")
	if err != nil {
		return err
	}
	defer nc.Close()
	buf := make([]byte, f.size)
	hist := newLatHist()
	var rep pingReport
	for i := uint64(0); i < *count; i++ {
		putStamp(buf, i, time.Now().UnixNano())
		t0 := monoNs()
		rep.Pings++
		if _, err := nc.Request(f.subject, buf, time.Second); err != nil {
			if errors.Is(err, nats.ErrTimeout) {
				rep.Timeout++
				continue
			}
			return err
		}
		recordLat(hist, monoNs()-t0)
		rep.Pongs++
	}
	return printLatReport(stdout, &rep, &rep.latStats, hist, *hgrm)
}
