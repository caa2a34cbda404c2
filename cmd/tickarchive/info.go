package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/mold"
)

// holdings sum what one channel's records show.
type holdings struct {
	channel                            int
	records, lossRecords, lostMessages uint64
	corrupt, packets                   uint64
	bytes                              int64
	firstNs, lastNs                    int64
	sessions                           []*sessionHoldings
	keys                               int // key records (a file's)
}

// sessionHoldings are one session's part of a channel's records.
type sessionHoldings struct {
	session        mold.Session
	first, next    uint64
	records        uint64
	lostMessages   uint64
	firstNs, lastN int64
}

// add counts a record of n bytes.
func (h *holdings) add(r *archive.Record, n int) {
	h.records++
	h.bytes += int64(n)
	h.packets += uint64(r.Packets())
	if h.firstNs == 0 || r.FirstNs < h.firstNs {
		h.firstNs = r.FirstNs
	}
	h.lastNs = max(h.lastNs, r.LastNs)
	var s *sessionHoldings
	for _, x := range h.sessions {
		if x.session == r.Session {
			s = x
		}
	}
	if s == nil {
		s = &sessionHoldings{session: r.Session, first: r.First, next: r.Next, firstNs: r.FirstNs}
		h.sessions = append(h.sessions, s)
	}
	s.records++
	s.first, s.next = min(s.first, r.First), max(s.next, r.Next)
	s.lastN = max(s.lastN, r.LastNs)
	if r.Kind == archive.KindLoss {
		h.lossRecords++
		h.lostMessages += r.Next - r.First
		s.lostMessages += r.Next - r.First
	}
}

// write prints the channel's holdings.
func (h *holdings) write(w io.Writer) {
	fmt.Fprintf(w, "channel %d: %d records (%d loss records, %d messages lost), %d corrupt, %d packets, %s",
		h.channel, h.records, h.lossRecords, h.lostMessages, h.corrupt, h.packets, bytesText(h.bytes))
	if h.records > 0 {
		fmt.Fprintf(w, ", recorded %s to %s", stamp(h.firstNs), stamp(h.lastNs))
	}
	if h.keys > 0 {
		fmt.Fprintf(w, ", %d key records", h.keys)
	}
	fmt.Fprintln(w)
	for _, s := range h.sessions {
		fmt.Fprintf(w, "  session %s: messages %d-%d, %d records", s.session, s.first, s.next-1, s.records)
		if s.lostMessages > 0 {
			fmt.Fprintf(w, ", %d messages lost", s.lostMessages)
		}
		fmt.Fprintf(w, ", recorded %s to %s\n", stamp(s.firstNs), stamp(s.lastN))
	}
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000Z") }

func bytesText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func info(ctx context.Context, s *infoSettings, stdout, stderr io.Writer) int {
	chs, err := s.channels()
	if err != nil {
		return badSettings(stderr, s.Origins, err)
	}
	var hs []*holdings
	corrupt := 0
	if s.File != "" {
		hs, corrupt, err = fileInfo(s.File, chs, stdout)
	} else {
		hs, err = streamInfo(ctx, s, chs, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tickarchive: info: %v\n", err)
		return 1
	}
	for _, h := range hs {
		h.write(stdout)
	}
	for _, h := range hs {
		corrupt += int(h.corrupt)
	}
	if corrupt > 0 {
		return 1
	}
	return 0
}

// streamInfo reads the channels' records from JetStream.
func streamInfo(ctx context.Context, s *infoSettings, chs []int, stdout, stderr io.Writer) ([]*holdings, error) {
	nc, err := s.connect(stderr)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if chs == nil {
		if chs, err = archive.Channels(ctx, nc, s.FeedName); err != nil {
			return nil, fmt.Errorf("feed %s (--feed-name) on %s: %w", s.FeedName, nc.ConnectedUrlRedacted(), err)
		}
	}
	fmt.Fprintf(stdout, "feed %s: stream %s on %s, channels %v\n", s.FeedName, archive.StreamName(s.FeedName), nc.ConnectedUrlRedacted(), chs)
	var out []*holdings
	for _, ch := range chs {
		h := &holdings{channel: ch}
		out = append(out, h)
		rd, err := archive.OpenReader(ctx, archive.ReaderConfig{Feed: s.FeedName, Channel: ch, Conn: nc})
		if errors.Is(err, archive.ErrEmpty) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("channel %d: %w", ch, err)
		}
		for {
			rec, _, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, archive.ErrCorrupt) {
				h.corrupt++
				fmt.Fprintf(stderr, "tickarchive: info: channel %d: %v\n", ch, err)
				continue
			}
			if err != nil {
				rd.Close()
				return nil, fmt.Errorf("channel %d: %w", ch, err)
			}
			h.add(&rec, len(rec.Bytes()))
		}
		rd.Close()
	}
	return out, nil
}

// fileInfo reads an archive file through.
func fileInfo(path string, chs []int, stdout io.Writer) ([]*holdings, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("--file: %w", err)
	}
	defer f.Close()
	fr, err := archive.NewFileReader(f, path)
	if err != nil {
		return nil, 0, err
	}
	by := map[int]*holdings{}
	get := func(ch int) *holdings {
		if by[ch] == nil {
			by[ch] = &holdings{channel: ch}
		}
		return by[ch]
	}
	for _, ch := range chs {
		get(ch)
	}
	var corrupt []string
	for {
		e, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, archive.ErrCorrupt) {
			corrupt = append(corrupt, err.Error())
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		switch e.Kind {
		case archive.FileKeys:
			if chs == nil || slices.Contains(chs, e.Keys.Channel) {
				get(e.Keys.Channel).keys++
			}
		case archive.FileRecord:
			if chs == nil || slices.Contains(chs, e.Record.Channel) {
				get(e.Record.Channel).add(&e.Record, len(e.Record.Bytes()))
			}
		}
	}
	fmt.Fprintf(stdout, "archive file %s: feed %s, %s\n", path, fr.Feed(), bytesText(fr.Offset()))
	if len(corrupt) > 0 {
		// A corrupt record's channel is not known: its header is what
		// failed. Each is reported, and counted on no channel.
		fmt.Fprintf(stdout, "%d corrupt records:\n  %s\n", len(corrupt), strings.Join(corrupt, "\n  "))
	}
	var out []*holdings
	for _, h := range by {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b *holdings) int { return a.channel - b.channel })
	return out, len(corrupt), nil
}
