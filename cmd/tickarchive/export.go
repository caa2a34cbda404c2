package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/internal/cliconf"
	"github.com/tickcast/tickcast/mold"
)

// exportPlan is what export's settings ask for, checked.
type exportPlan struct {
	from, to archive.Position
	channels []int // nil: every channel held
	group    netip.AddrPort
}

// plan checks the settings; its errors are *cliconf.Error.
func (s *exportSettings) plan() (exportPlan, error) {
	var p exportPlan
	var err error
	if s.From == "" {
		return p, cliconf.Invalid("from", "required: start, an RFC 3339 time or SESSION:SEQ")
	}
	if p.from, err = archive.ParsePosition(s.From); err != nil {
		return p, cliconf.Invalid("from", "%v", err)
	}
	if s.To != "" {
		if p.to, err = archive.ParsePosition(s.To); err != nil {
			return p, cliconf.Invalid("to", "%v", err)
		}
		if !p.from.Time.IsZero() && !p.to.Time.IsZero() && !p.to.Time.After(p.from.Time) {
			return p, cliconf.Invalid("to", "%s is not after --from %s", p.to, p.from)
		}
		if p.from.Seq > 0 && p.to.Seq > 0 && p.from.Session == p.to.Session && p.to.Seq < p.from.Seq {
			return p, cliconf.Invalid("to", "%s is before --from %s", p.to, p.from)
		}
	}
	switch s.Format {
	case "pcap", "archive":
	case "":
		return p, cliconf.Invalid("format", "required: pcap or archive")
	default:
		return p, cliconf.Invalid("format", "%q: want pcap or archive", s.Format)
	}
	if s.Output == "" {
		return p, cliconf.Invalid("output", "required: the file to write (-o FILE)")
	}
	if p.group, err = tickcast.ParseGroup(s.Group); err != nil {
		return p, cliconf.Invalid("group", "%v", err)
	}
	if p.channels, err = s.channels(); err != nil {
		return p, err
	}
	for _, ch := range p.channels {
		if _, err := tickcast.ChannelGroup(p.group, ch); err != nil {
			return p, cliconf.Invalid("channels", "%d: %v (--group %s)", ch, err, s.Group)
		}
	}
	return p, nil
}

// exportSummary is the line export prints.
type exportSummary struct {
	Format       string `json:"format"`
	File         string `json:"file"`
	Feed         string `json:"feed"`
	From         string `json:"from"`
	To           string `json:"to,omitempty"`
	Channels     []int  `json:"channels"`
	Records      uint64 `json:"records"`
	LossRecords  uint64 `json:"loss_records"`
	LostMessages uint64 `json:"lost_messages"`
	Packets      uint64 `json:"packets"`
	KeyRecords   uint64 `json:"key_records,omitempty"`
	Corrupt      uint64 `json:"corrupt"`
	Bytes        int64  `json:"bytes"`
	OK           bool   `json:"ok"`
}

func export(ctx context.Context, s *exportSettings, stdout, stderr io.Writer) int {
	p, err := s.plan()
	if err != nil {
		return badSettings(stderr, s.Origins, err)
	}
	nc, err := s.connect(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickarchive: export: %v\n", err)
		return 1
	}
	defer nc.Close()
	if p.channels == nil {
		if p.channels, err = archive.Channels(ctx, nc, s.FeedName); err != nil {
			fmt.Fprintf(stderr, "tickarchive: export: feed %s (--feed-name) on %s: %v\n", s.FeedName, nc.ConnectedUrlRedacted(), err)
			return 1
		}
		if len(p.channels) == 0 {
			fmt.Fprintf(stderr, "tickarchive: export: the archive of feed %s (--feed-name) on %s holds no record\n", s.FeedName, nc.ConnectedUrlRedacted())
			return 1
		}
	}
	sum := exportSummary{Format: s.Format, File: s.Output, Feed: s.FeedName, From: p.from.String(), Channels: p.channels}
	if !p.to.IsZero() {
		sum.To = p.to.String()
	}
	f, err := os.Create(s.Output)
	if err != nil {
		fmt.Fprintf(stderr, "tickarchive: export: --output: %v\n", err)
		return 1
	}
	e := &exporter{ctx: ctx, nc: nc, s: s, p: p, sum: &sum, stderr: stderr}
	if s.Format == "pcap" {
		err = e.pcap(f)
	} else {
		err = e.archive(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(s.Output)
		fmt.Fprintf(stderr, "tickarchive: export: %v\n", err)
		return 1
	}
	sum.OK = sum.Corrupt == 0
	b, _ := json.Marshal(sum)
	fmt.Fprintf(stdout, "%s\n", b)
	if !sum.OK {
		return 1
	}
	return 0
}

// exporter writes one export.
type exporter struct {
	ctx    context.Context
	nc     *nats.Conn
	s      *exportSettings
	p      exportPlan
	sum    *exportSummary
	stderr io.Writer
}

// open opens channel ch's range.
func (e *exporter) open(ch int) (*archive.RangeReader, error) {
	rr, err := archive.OpenRange(e.ctx, archive.RangeConfig{Feed: e.s.FeedName, Channel: ch, Conn: e.nc, From: e.p.from, To: e.p.to})
	if err != nil {
		return nil, fmt.Errorf("channel %d: --from %s: %w", ch, e.p.from, err)
	}
	return rr, nil
}

// next returns channel ch's next record in range, counting it; corrupt
// records are reported, counted and skipped. ok is false at the end.
func (e *exporter) next(ch int, rr *archive.RangeReader) (archive.RangeRecord, bool, error) {
	for {
		r, err := rr.Next()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return r, false, nil
		case errors.Is(err, archive.ErrCorrupt):
			e.sum.Corrupt++
			fmt.Fprintf(e.stderr, "tickarchive: export: channel %d: left out: %v\n", ch, err)
			continue
		default:
			return r, false, fmt.Errorf("channel %d: %w", ch, err)
		}
		e.sum.Records++
		if r.Record.Kind == archive.KindLoss {
			e.sum.LossRecords++
			e.sum.LostMessages += r.Record.Next - r.Record.First
		}
		return r, true, nil
	}
}

// archive writes the range's records and the key records of their
// sessions, each session's before its first record.
func (e *exporter) archive(f *os.File) error {
	fw, err := archive.NewFileWriter(f, e.s.FeedName)
	if err != nil {
		return err
	}
	for _, ch := range e.p.channels {
		keys, err := archive.ReadKeyRecords(e.ctx, e.nc, e.s.FeedName, ch)
		if err != nil {
			return fmt.Errorf("channel %d: %w", ch, err)
		}
		written := map[mold.Session]bool{}
		rr, err := e.open(ch)
		if err != nil {
			return err
		}
		for {
			r, ok, err := e.next(ch, rr)
			if err != nil || !ok {
				rr.Close()
				if err != nil {
					return err
				}
				break
			}
			if s := r.Record.Session; !written[s] {
				written[s] = true
				for _, k := range keys {
					if ks, _ := mold.ParseSession(k.Keys.Session); ks == s {
						if err := fw.WriteKeys(k.Keys, k.StreamSeq); err != nil {
							return err
						}
						e.sum.KeyRecords++
					}
				}
			}
			e.sum.Packets += uint64(r.Hi - r.Lo)
			if err := fw.WriteRecord(r.Record, r.StreamSeq); err != nil {
				return err
			}
		}
	}
	if err := fw.Flush(); err != nil {
		return err
	}
	e.sum.Bytes = fw.Written()
	return nil
}

// chanCursor is one channel's place in a pcap export: its current record's
// packets and the next one to write.
type chanCursor struct {
	ch    int
	rr    *archive.RangeReader
	dst   netip.AddrPort
	rec   archive.RangeRecord
	pkts  [][]byte // the record's packets, all of them
	i     int      // next packet to write, Lo..Hi-1
	at    int64    // its time
	ended bool
}

// load moves c to its next record with packets to write.
func (e *exporter) load(c *chanCursor) error {
	for {
		r, ok, err := e.next(c.ch, c.rr)
		if err != nil {
			return err
		}
		if !ok {
			c.ended = true
			return nil
		}
		if r.Hi <= r.Lo {
			continue // a loss record
		}
		c.rec, c.pkts, c.i = r, c.pkts[:0], r.Lo
		_ = r.Record.EachPacket(func(p []byte) error { c.pkts = append(c.pkts, p); return nil })
		c.setTime()
		return nil
	}
}

// setTime sets the time of packet i: a record's packets are spread evenly
// over the span it was recorded in, as a replay paces them.
func (c *chanCursor) setTime() {
	r, n := &c.rec.Record, len(c.pkts)
	c.at = r.FirstNs
	if n > 1 {
		c.at += (r.LastNs - r.FirstNs) * int64(c.i) / int64(n-1)
	}
}

// pcap writes the range's packets of every channel in time order.
func (e *exporter) pcap(f *os.File) error {
	pw, err := newPcapWriter(f, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		return err
	}
	var cs []*chanCursor
	defer func() {
		for _, c := range cs {
			c.rr.Close()
		}
	}()
	for _, ch := range e.p.channels {
		dst, _ := tickcast.ChannelGroup(e.p.group, ch) // checked by plan
		rr, err := e.open(ch)
		if err != nil {
			return err
		}
		c := &chanCursor{ch: ch, rr: rr, dst: dst}
		cs = append(cs, c)
		if err := e.load(c); err != nil {
			return err
		}
	}
	for {
		var c *chanCursor
		for _, x := range cs {
			if !x.ended && (c == nil || x.at < c.at) {
				c = x
			}
		}
		if c == nil {
			break
		}
		if err := pw.datagram(c.at, c.dst, c.pkts[c.i]); err != nil {
			return err
		}
		e.sum.Packets++
		if c.i++; c.i < c.rec.Hi {
			c.setTime()
		} else if err := e.load(c); err != nil {
			return err
		}
	}
	if err := pw.flush(); err != nil {
		return err
	}
	e.sum.Bytes = pw.n
	return nil
}
