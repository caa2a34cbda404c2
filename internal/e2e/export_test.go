package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/feed/pcap"
	"github.com/tickcast/tickcast/internal/testenv"
	"github.com/tickcast/tickcast/mold"
)

// TestArchiveExport: a feed handler archives 100,000 messages on 4
// channels, channel 1 encrypted; tickarchive exports the archive to an
// archive file and to a pcap. With the feed handler and its NATS server
// gone, subscriber --replay-file replays the file through its own path,
// verified against the synthetic feed, 0 missing, without contacting NATS.
// The pcap holds every packet of the archive byte for byte, to its
// channel's group, as the project's pcap reader reads it and as tshark's
// moldudp64 dissector decodes it (skipped, saying so, without tshark).
func TestArchiveExport(t *testing.T) {
	const count = 100_000
	ga, _, port := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	dir := t.TempDir()
	fh := start(t, ctx, feedhandlerBin, "--archive", "--archive-dir", filepath.Join(dir, "js"), "--encrypt", "1", "--count", strconv.Itoa(count),
		"--rate", "100000", "--group", ga, "--linger", "60s", "--heartbeat", "60s") // the linger repeats the end of session, archived, every heartbeat: not during the exports
	fh.waitLog(t, `session ended; serving recovery`, 60*time.Second)
	url := "nats://" + natsAddr(t)

	file, capture := filepath.Join(dir, "day.tca"), filepath.Join(dir, "day.pcap")
	for _, args := range [][]string{
		{"export", "--nats-url", url, "--from", "start", "--format", "archive", "-o", file},
		{"export", "--nats-url", url, "--from", "start", "--format", "pcap", "-o", capture, "--group", ga},
	} {
		ex := launch(t, ctx, tickarchiveBin, args...)
		if code := ex.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("tickarchive %s: exit %d\n%s\n%s", strings.Join(args, " "), code, ex.stdout.String(), tail(ex.stderr.String()))
		}
		if sum := ex.summary(t); sum["ok"] != true || sum["corrupt"] != float64(0) || sum["packets"].(float64) < 1 {
			t.Fatalf("tickarchive %s: summary %v", strings.Join(args, " "), sum)
		}
	}
	inf := launch(t, ctx, tickarchiveBin, "info", "--nats-url", url)
	if code := inf.wait(t, 60*time.Second); code != 0 || !strings.Contains(inf.stdout.String(), "channel 3: ") {
		t.Fatalf("tickarchive info: exit %d\n%s\n%s", code, inf.stdout.String(), tail(inf.stderr.String()))
	}
	t.Logf("tickarchive info:\n%s", inf.stdout.String())
	fh.cmd.Process.Kill()
	fh.wait(t, 10*time.Second)

	// No NATS server now: start puts the dead test address first.
	rep := start(t, ctx, subscriberBin, "--replay-file", file, "--replay-from", "start", "--verify")
	if code := rep.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("replay of the file: exit %d\nstderr:\n%s", code, tail(rep.stderr.String()))
	}
	sum := rep.summary(t)
	replay, _ := sum["replay"].(map[string]any)
	if sum["received"] != float64(count) || sum["missing"] != float64(0) || sum["verify_ok"] != true || sum["exit_reason"] != "replay-end" ||
		replay == nil || replay["unverified"] != float64(0) || replay["errors"] != float64(0) || replay["corrupt"] != float64(0) {
		t.Fatalf("replay of the file: received %v missing %v verify_ok %v exit %v replay %v; want %d received, none missing, verified, replay-end",
			sum["received"], sum["missing"], sum["verify_ok"], sum["exit_reason"], replay, count)
	}
	if s := rep.stderr.String(); strings.Contains(s, `"message":"nats"`) {
		t.Errorf("the replay of a file made a NATS connection:\n%s", tail(s))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--replay-file", file}, "replay-file"},
		{[]string{"--replay-file", filepath.Join(dir, "none.tca"), "--replay-from", "start"}, "replay-file"},
	} {
		bad := start(t, ctx, subscriberBin, c.args...)
		if code := bad.wait(t, 10*time.Second); code != 2 || !strings.Contains(bad.stderr.String(), "--"+c.want) {
			t.Errorf("subscriber %v: exit %d, stderr:\n%s\nwant 2, naming --%s", c.args, code, tail(bad.stderr.String()), c.want)
		}
	}

	// The pcap against the file, channel by channel: the same packets, as
	// stored, in order.
	want := filePackets(t, file)
	group := netip.MustParseAddrPort(ga)
	dsts := map[netip.AddrPort]int{}
	total := 0
	for ch, pkts := range want {
		dst, err := tickcast.ChannelGroup(group, ch)
		if err != nil {
			t.Fatal(err)
		}
		dsts[dst] = ch
		total += len(pkts)
	}
	f, err := os.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	dr := pcap.NewDatagramReader(rd, netip.AddrPort{})
	next := map[int]int{}
	n := 0
	for {
		d, err := dr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ch, ok := dsts[d.Dst]
		if !ok {
			t.Fatalf("datagram %d to %v, no channel's group", n, d.Dst)
		}
		if i := next[ch]; i >= len(want[ch]) || !bytes.Equal(d.Payload, want[ch][i]) {
			t.Fatalf("datagram %d: not channel %d's packet %d of the archive: % x, want % x", n, ch, i, d.Payload, want[ch][min(i, len(want[ch])-1)])
		}
		next[ch]++
		n++
	}
	if n != total || len(want) != 4 {
		t.Fatalf("the pcap holds %d datagrams; the archive file %d packets of %d channels (want 4)", n, total, len(want))
	}

	t.Run("tshark", func(t *testing.T) {
		tshark := testenv.NeedTool(t, "tshark")
		pkts := tsDissect(t, ctx, tshark, capture, port)
		if len(pkts) != total {
			t.Fatalf("tshark reads %d packets, the archive holds %d", len(pkts), total)
		}
		byDst := map[string]int{}
		for dst, ch := range dsts {
			byDst[dst.Addr().String()] = ch
		}
		next := map[int]int{}
		for _, p := range pkts {
			ch, ok := byDst[p.dst]
			if !ok || !p.isMold || p.src != "127.0.0.1" {
				t.Fatalf("tshark frame %d from %s to %s (moldudp64 %v): want MoldUDP64 from 127.0.0.1 to a channel's group", p.frame, p.src, p.dst, p.isMold)
			}
			h, _ := mold.DecodeHeader(want[ch][next[ch]])
			if p.session != h.Session.String() || p.sequence != h.Seq || p.count != uint64(h.Count) {
				t.Fatalf("tshark frame %d: session %q sequence %d count %d; the archive's packet has %s %d %d",
					p.frame, p.session, p.sequence, p.count, h.Session, h.Seq, h.Count)
			}
			next[ch]++
		}
	})
}

// filePackets reads an archive file's packets, by channel.
func filePackets(t *testing.T, path string) map[int][][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fr, err := archive.NewFileReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][][]byte{}
	for {
		e, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == archive.FileRecord {
			e.Record.EachPacket(func(p []byte) error {
				out[e.Record.Channel] = append(out[e.Record.Channel], bytes.Clone(p))
				return nil
			})
		}
	}
}
