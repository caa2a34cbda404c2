package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/feed/pcap"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// recordArchive records, through a real JetStream, sealed packets of two
// channels (channel 1 encrypted), channel 0 in two sessions, with their
// key records, and returns the server's URL.
func recordArchive(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	srv, err := natsconn.StartServer(natsconn.ServerConfig{JetStream: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	rec, err := archive.NewRecorder(ctx, archive.RecorderConfig{Feed: "T", Channels: 2, Conn: nc, RecordBytes: 70_000})
	if err != nil {
		t.Fatal(err)
	}
	b, err := mold.NewBuilder(1400)
	if err != nil {
		t.Fatal(err)
	}
	for ch := range 2 {
		names := []string{"AAA", "BBB"}[:2-ch]
		for _, name := range names {
			s, _ := mold.ParseSession(name)
			secret := seal.NewSecret()
			sch, err := seal.NewSchedule(s, ch, secret, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ch == 1 {
				sch.Encrypt()
			}
			if err := rec.RecordKeys(ctx, archive.KeyRecord{Session: name, Channel: ch, Secret: secret, Rotation: time.Second, Encrypt: ch == 1}); err != nil {
				t.Fatal(err)
			}
			seq := uint64(1)
			for i := range 1500 {
				b.Start(s, seq)
				for j := range 1 + i%20 {
					if !b.Add(fmt.Appendf(nil, "ch%d %s message %d.%d", ch, name, seq, j)) {
						t.Fatal("a message did not fit")
					}
					seq++
				}
				p := append([]byte(nil), b.Finish()...)
				sealed, err := sch.Seal(append(make([]byte, 0, len(p)+seal.Overhead), p...), time.Now().UnixNano())
				if err != nil {
					t.Fatal(err)
				}
				rec.Record(ch, sealed)
			}
			rec.Record(ch, mold.AppendEndOfSession(nil, s, seq))
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL(), nc
}

// stored reads channel ch's records from the stream: each record's bytes,
// and every packet.
func stored(t *testing.T, nc *nats.Conn, ch int) (records, packets [][]byte) {
	t.Helper()
	rd, err := archive.OpenReader(context.Background(), archive.ReaderConfig{Feed: "T", Channel: ch, Conn: nc})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for {
		rec, _, err := rd.Next()
		if err == io.EOF {
			return records, packets
		}
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, bytes.Clone(rec.Bytes()))
		rec.EachPacket(func(p []byte) error { packets = append(packets, bytes.Clone(p)); return nil })
	}
}

// tickarchive runs the command in this process.
func tickarchive(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// readPcap reads a capture with the project's pcap reader: each
// datagram's destination, source, time and payload.
func readPcap(t *testing.T, path string) []pcap.Datagram {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dr := pcap.NewDatagramReader(rd, netip.AddrPort{})
	var out []pcap.Datagram
	for {
		d, err := dr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d.Payload = bytes.Clone(d.Payload)
		out = append(out, d)
	}
	if c := dr.Counts(); c.Malformed != 0 || c.NotUDP != 0 || c.Records != uint64(len(out)) {
		t.Fatalf("pcap reader counts %+v for %d datagrams: want every record a whole UDP datagram", c, len(out))
	}
	return out
}

// TestExportPcap: an export of every channel to pcap holds every packet of
// the archive, byte for byte as stored (sealed), to its channel's group and
// port from 127.0.0.1, in time order, as the project's pcap reader reads
// it; a range of one channel from SESSION:SEQ to SESSION:SEQ starts and
// ends at the packets holding them.
func TestExportPcap(t *testing.T) {
	url, nc := recordArchive(t)
	path := filepath.Join(t.TempDir(), "all.pcap")
	code, out, errs := tickarchive(t, "export", "--nats-url", url, "--feed-name", "T", "--from", "start", "--format", "pcap", "-o", path,
		"--group", "239.1.2.3:4000")
	if code != 0 {
		t.Fatalf("export exit %d\n%s%s", code, out, errs)
	}
	var sum exportSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	got := readPcap(t, path)
	want := map[netip.AddrPort][][]byte{}
	total := 0
	for ch := range 2 {
		_, pkts := stored(t, nc, ch)
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{239, 1, 2, 3 + byte(ch)}), 4000)
		want[dst] = pkts
		total += len(pkts)
	}
	if len(got) != total || sum.Packets != uint64(total) || !sum.OK || fmt.Sprint(sum.Channels) != "[0 1]" {
		t.Fatalf("pcap holds %d datagrams, summary %+v; the archive holds %d packets of channels 0 and 1", len(got), sum, total)
	}
	next := map[netip.AddrPort]int{}
	var last int64
	for i, d := range got {
		pkts, ok := want[d.Dst]
		if !ok || d.Src != netip.MustParseAddrPort("127.0.0.1:4000") {
			t.Fatalf("datagram %d from %v to %v: want from 127.0.0.1:4000 to a channel's group", i, d.Src, d.Dst)
		}
		if j := next[d.Dst]; j >= len(pkts) || !bytes.Equal(d.Payload, pkts[j]) {
			t.Fatalf("datagram %d to %v: not the archive's packet %d", i, d.Dst, j)
		}
		next[d.Dst]++
		if d.TsNs < last {
			t.Fatalf("datagram %d at %d, before the one ahead of it (%d)", i, d.TsNs, last)
		}
		last = d.TsNs
	}

	// A range of channel 0, session BBB, messages 500 to 900.
	part := filepath.Join(t.TempDir(), "part.pcap")
	if code, out, errs := tickarchive(t, "export", "--nats-url", url, "--feed-name", "T", "--from", "BBB:500", "--to", "BBB:900", "--channels", "0",
		"--format", "pcap", "-o", part); code != 0 {
		t.Fatalf("export of a range: exit %d\n%s%s", code, out, errs)
	}
	dgs := readPcap(t, part)
	if len(dgs) < 2 {
		t.Fatalf("range BBB:500 to BBB:900: %d datagrams", len(dgs))
	}
	// The packets are sealed, their MoldUDP64 header in the clear.
	first, _ := mold.DecodeHeader(dgs[0].Payload)
	lastH, _ := mold.DecodeHeader(dgs[len(dgs)-1].Payload)
	if first.Session.String() != "BBB" || first.Seq > 500 || first.Seq+uint64(first.Messages()) <= 500 ||
		lastH.Seq > 900 || lastH.Seq+uint64(lastH.Messages()) <= 900 {
		t.Fatalf("range BBB:500 to BBB:900 holds %s:%d+%d to %d+%d: want the packets holding 500 and 900",
			first.Session, first.Seq, first.Messages(), lastH.Seq, lastH.Messages())
	}
}

// TestExportArchive: an export to an archive file holds every record of
// the stream byte for byte and the key records of their sessions; info
// says the same of the file as of the stream.
func TestExportArchive(t *testing.T) {
	url, nc := recordArchive(t)
	path := filepath.Join(t.TempDir(), "all.tca")
	code, out, errs := tickarchive(t, "export", "--nats-url", url, "--feed-name", "T", "--from", "start", "--format", "archive", "--output", path)
	if code != 0 {
		t.Fatalf("export exit %d\n%s%s", code, out, errs)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr, err := archive.NewFileReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	var recs [2][][]byte
	keys := map[string]bool{}
	for {
		e, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e.Kind {
		case archive.FileRecord:
			if !keys[fmt.Sprintf("%d %s", e.Record.Channel, e.Record.Session)] {
				t.Fatalf("a record of channel %d session %s before its key record", e.Record.Channel, e.Record.Session)
			}
			recs[e.Record.Channel] = append(recs[e.Record.Channel], bytes.Clone(e.Record.Bytes()))
		case archive.FileKeys:
			keys[fmt.Sprintf("%d %s", e.Keys.Channel, e.Keys.Session)] = true
		}
	}
	if len(keys) != 3 || fr.Feed() != "T" {
		t.Fatalf("key records %v of feed %s; want 3 (channel 0 AAA and BBB, channel 1 AAA) of T", keys, fr.Feed())
	}
	for ch := range 2 {
		want, _ := stored(t, nc, ch)
		if len(recs[ch]) != len(want) {
			t.Fatalf("channel %d: %d records in the file, %d in the stream", ch, len(recs[ch]), len(want))
		}
		for i := range want {
			if !bytes.Equal(recs[ch][i], want[i]) {
				t.Fatalf("channel %d record %d differs from the stream's", ch, i)
			}
		}
	}

	code, fromStream, errs := tickarchive(t, "info", "--nats-url", url, "--feed-name", "T")
	if code != 0 {
		t.Fatalf("info exit %d\n%s%s", code, fromStream, errs)
	}
	code, fromFile, errs := tickarchive(t, "info", "--file", path)
	if code != 0 {
		t.Fatalf("info --file exit %d\n%s%s", code, fromFile, errs)
	}
	t.Logf("info:\n%s\ninfo --file:\n%s", fromStream, fromFile)
	for _, want := range []string{
		fmt.Sprintf("channel 0: %d records (0 loss records, 0 messages lost), 0 corrupt", len(recs[0])),
		fmt.Sprintf("channel 1: %d records (0 loss records, 0 messages lost), 0 corrupt", len(recs[1])),
		"  session AAA: messages 1-15750, ", "  session BBB: messages 1-15750, ",
	} {
		if !strings.Contains(fromStream, want) || !strings.Contains(fromFile, want) {
			t.Errorf("info and info --file should both say %q", want)
		}
	}
	if !strings.Contains(fromFile, "2 key records") {
		t.Errorf("info --file does not count channel 0's 2 key records")
	}
}

// TestExportRefused: a range the archive does not hold is refused as a
// replay refuses it, naming what it holds, and nothing is left behind; bad
// settings exit 2 naming the flag.
func TestExportRefused(t *testing.T) {
	url, _ := recordArchive(t)
	path := filepath.Join(t.TempDir(), "x.pcap")
	late := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		from, want string
	}{
		{late, "holds records of tickcast.T.archive.0 up to"},
		{"ZZZ:5", "the archive holds sessions AAA:1-15750, BBB:1-15750"},
	} {
		code, _, errs := tickarchive(t, "export", "--nats-url", url, "--feed-name", "T", "--from", c.from, "--format", "pcap", "-o", path, "--channels", "0")
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("--from %s: exit %d, stderr %q; want 1 naming what the archive holds (%q)", c.from, code, errs, c.want)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("--from %s: the refused export left %s behind", c.from, path)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--format", "pcap", "-o", path}, "from: required"},
		{[]string{"export", "--from", "noon", "--format", "pcap", "-o", path}, `from: "noon": want an RFC 3339 time`},
		{[]string{"export", "--from", "start", "--format", "csv", "-o", path}, `format: "csv": want pcap or archive (from --format)`},
		{[]string{"export", "--from", "start", "--format", "pcap"}, "output: required"},
		{[]string{"export", "--from", "AAA:9", "--to", "AAA:3", "--format", "pcap", "-o", path}, "to: AAA:3 is before --from AAA:9 (from --to)"},
		{[]string{"export", "--from", "start", "--format", "pcap", "-o", path, "--group", "10.0.0.1:5"}, "group: "},
		{[]string{"export", "--from", "start", "--format", "pcap", "-o", path, "--channels", "x"}, `channels: "x": want channel numbers`},
		{[]string{"info", "--channels", "-1"}, `channels: "-1"`},
		{[]string{"info", "--bogus"}, "bogus: unknown setting"},
		{[]string{"frob"}, `unknown command "frob"`},
		{nil, "Commands:"},
	} {
		code, _, errs := tickarchive(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("tickarchive %v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, out, _ := tickarchive(t, "export", "--help"); code != 0 || !strings.Contains(out, "-o, --output") || strings.Contains(out, "TICKCAST_FORMAT") {
		t.Errorf("export --help: exit %d\n%s", code, out)
	}
}
