package e2e

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tickcast/tickcast/archive"
	"github.com/tickcast/tickcast/internal/natsconn"
	"github.com/tickcast/tickcast/internal/natstest"
)

// archiveStream is the archive stream of the default feed.
var archiveStream = archive.StreamName(natsconn.DefaultFeed)

// replayed runs subscriber --replay-from start --verify against natsURL
// and returns its summary and its replay part.
func replayed(t *testing.T, ctx context.Context, natsURL string) (map[string]any, map[string]any) {
	t.Helper()
	rep := launch(t, ctx, subscriberBin, "--nats-url", natsURL, "--metrics-addr", "127.0.0.1:0", "--replay-from", "start", "--verify")
	code := rep.wait(t, 60*time.Second)
	sum := rep.summary(t)
	replay, _ := sum["replay"].(map[string]any)
	if replay == nil {
		t.Fatalf("replay exit %d, no replay summary: %v\n%s", code, sum, tail(rep.stderr.String()))
	}
	t.Logf("replay: exit %d, received %v, missing %v, verify_ok %v, replay %v", code, sum["received"], sum["missing"], sum["verify_ok"], replay)
	return sum, replay
}

// TestArchiveStorageFull: the feed handler archives to a NATS server whose
// JetStream may store 4 MiB, far less than the feed. Once it is full,
// JetStream refuses the records: the feed handler logs the fault once,
// naming the stream, the fault and what to do, counts the errors and the
// messages lost to the archive, and the runs of them that no loss record
// could cover (the storage is full to the end), and multicast goes on: a
// live verifying subscriber receives every message.
func TestArchiveStorageFull(t *testing.T) {
	srv, err := natsconn.StartServer(natsconn.ServerConfig{JetStream: true, StoreDir: t.TempDir(), JetStreamMaxStore: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ga, _, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const count = 300_000 // about 21 MB of records
	n := strconv.Itoa(count)
	live := launch(t, ctx, subscriberBin, "--nats-url", srv.ClientURL(), "--metrics-addr", "127.0.0.1:0", "--group", ga, "--verify", "--expect", n)
	live.waitLog(t, `"subscribed"`, 10*time.Second)
	fh := launch(t, ctx, feedhandlerBin, "--nats-url", srv.ClientURL(), "--archive", "--group", ga, "--count", n, "--rate", "100000",
		"--metrics-addr", "127.0.0.1:0", "--linger", "1s")
	if code := fh.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("feed handler exit %d\n%s", code, tail(fh.stderr.String()))
	}
	if code := live.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("live subscriber exit %d: %v", code, live.summary(t))
	}
	s := live.summary(t)
	if num(t, s, "received") != count || num(t, s, "missing") != 0 || s["verify_ok"] != true {
		t.Fatalf("live subscriber: %v; want all %d messages", s, count)
	}
	f := fh.summary(t)
	lost, errs, stored := num(t, f, "archive_lost_messages"), num(t, f, "archive_errors"), num(t, f, "archive_messages")
	t.Logf("feed handler: archived %d messages, lost %d to the archive, %d errors, %d loss records, %d loss runs unwritten",
		stored, lost, errs, num(t, f, "archive_loss_records"), num(t, f, "archive_unwritten_loss_runs"))
	if lost == 0 || errs == 0 || stored+lost != count {
		t.Errorf("archived %d + lost %d, %d errors: want some lost, counted, adding up to %d", stored, lost, errs, count)
	}
	// The storage stays full to the end: the loss records are tried and
	// refused, and the runs they would have covered are counted.
	if num(t, f, "archive_unwritten_loss_runs") == 0 {
		t.Errorf("no loss run counted unwritten, with the storage full to the end")
	}
	var fault string
	for _, line := range strings.Split(fh.stderr.String(), "\n") {
		if strings.Contains(line, `"fault":"storage-full"`) {
			if fault != "" {
				t.Errorf("the storage-full fault logged twice:\n%s\n%s", fault, line)
			}
			fault = line
		}
	}
	t.Logf("logged: %s", fault)
	for _, want := range []string{archiveStream, "insufficient resources", "the stream holds", "max_file_store", "--archive-max-bytes"} {
		if !strings.Contains(fault, want) {
			t.Errorf("the storage-full error does not say %q:\n%s", want, fault)
		}
	}
}

// TestArchiveR3NodeKilled: a feed handler archives to an R3 stream on a
// three-node cluster (--nats-url), and one node is killed in the middle
// of the feed: a node that does not lead the stream, or the stream's
// leader. A replay from the surviving nodes then gets every message,
// verified. If the leader's death lost records awaiting acknowledgement,
// each of their messages is in a loss record: what the replay misses is
// exactly what loss records say is lost.
func TestArchiveR3NodeKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: two cluster runs of about 10 s each")
	}
	for _, leader := range []bool{false, true} {
		name := "follower"
		if leader {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) {
			cluster := natstest.StartCluster(t, natstest.ClusterOptions{Quiet: true})
			ga, _, _ := groups(t)
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const count = 200_000 // 4 s at 50,000 msg/s
			n := strconv.Itoa(count)
			fh := launch(t, ctx, feedhandlerBin, "--nats-url", cluster.URL(), "--archive", "--group", ga, "--count", n, "--rate", "50000",
				"--metrics-addr", "127.0.0.1:0", "--linger", "1s")
			fh.waitLog(t, `"archiving every packet sent"`, 15*time.Second)
			if !strings.Contains(fh.stderr.String(), `"replicas":3`) {
				t.Fatalf("the archive stream is not R3:\n%s", tail(fh.stderr.String()))
			}
			time.Sleep(1500 * time.Millisecond)
			victim := -1
			for i := range cluster.URLs() {
				if cluster.Node(i).IsStreamLeader(archiveStream) == leader {
					victim = i
					break
				}
			}
			if victim < 0 {
				t.Fatalf("no node that leads the stream: %v", leader)
			}
			t.Logf("killing node %d (stream leader %v, %d clients)", victim, leader, cluster.Node(victim).NumClients())
			cluster.Kill(victim)
			if code := fh.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("feed handler exit %d\n%s", code, tail(fh.stderr.String()))
			}
			f := fh.summary(t)
			lost := num(t, f, "archive_lost_messages")
			t.Logf("feed handler: archived %d messages, lost %d, %d errors, %d loss records",
				num(t, f, "archive_messages"), lost, num(t, f, "archive_errors"), num(t, f, "archive_loss_records"))
			var alive []string
			for i, u := range cluster.URLs() {
				if i != victim {
					alive = append(alive, u)
				}
			}
			// The replay needs the stream's leader: a new one after the
			// leader's death.
			deadline := time.Now().Add(15 * time.Second)
			for !cluster.Node((victim+1)%3).IsStreamLeader(archiveStream) && !cluster.Node((victim+2)%3).IsStreamLeader(archiveStream) {
				if time.Now().After(deadline) {
					t.Fatal("no stream leader among the surviving nodes within 15s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			sum, replay := replayed(t, ctx, strings.Join(alive, ","))
			scanArchive(t, strings.Join(alive, ","))
			missing, received := num(t, sum, "missing"), num(t, sum, "received")
			if missing != num(t, replay, "lost_messages") || received+missing != count || num(t, replay, "corrupt") != 0 {
				t.Fatalf("replay: received %d, missing %d, loss records' messages %d; want %d in all, every missing one in a loss record",
					received, missing, num(t, replay, "lost_messages"), count)
			}
			if !leader && (lost != 0 || missing != 0 || num(t, replay, "loss_records") != 0 || sum["verify_ok"] != true) {
				t.Fatalf("a follower killed: %d lost to the archive, %d missing, %d loss records; want none", lost, missing, num(t, replay, "loss_records"))
			}
		})
	}
}

// TestArchiveHotHot: two hot-hot feed handlers (line A and line B of the
// same sessions, on a three-node cluster) both record with --archive. The
// archive holds most messages twice, in records of each one's packets; a
// replay delivers every message once, verified, with nothing missing,
// skipping the packets it has delivered already.
func TestArchiveHotHot(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a hot-hot run of about 10 s")
	}
	cluster := natstest.StartCluster(t, natstest.ClusterOptions{Quiet: true})
	ga, _, _ := groups(t)
	_, gb, _ := groups(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const count = 150_000 // 5 s at 30,000 msg/s
	fhArgs := func(line string) []string {
		return []string{"--nats-url", cluster.URL(), "--archive", "--session-record", "on", "--line", line, "--group", ga, "--group-b", gb,
			"--count", strconv.Itoa(count), "--rate", "30000", "--metrics-addr", "127.0.0.1:0", "--linger", "2s"}
	}
	a := launch(t, ctx, feedhandlerBin, fhArgs("a")...)
	a.waitLog(t, `"publishing"`, 15*time.Second)
	time.Sleep(500 * time.Millisecond)
	b := launch(t, ctx, feedhandlerBin, fhArgs("b")...)
	b.waitLog(t, "caught up with the peer", 15*time.Second)
	var archived uint64
	for name, p := range map[string]*proc{"A": a, "B": b} {
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("feed handler %s exit %d\n%s", name, code, tail(p.stderr.String()))
		}
		f := p.summary(t)
		t.Logf("feed handler %s: archived %d messages in %d records, lost %d", name, num(t, f, "archive_messages"), num(t, f, "archive_records"), num(t, f, "archive_lost_messages"))
		if num(t, f, "archive_messages") == 0 {
			t.Fatalf("feed handler %s archived nothing", name)
		}
		archived += num(t, f, "archive_messages")
	}
	sum, replay := replayed(t, ctx, cluster.URL())
	if num(t, sum, "received") != count || num(t, sum, "missing") != 0 || sum["verify_ok"] != true || num(t, replay, "lost_messages") != 0 ||
		num(t, replay, "duplicates") == 0 || sum["exit_reason"] != "replay-end" {
		t.Fatalf("replay: received %d, missing %d, verify_ok %v, replay %v; want each of %d messages once, verified, duplicates skipped",
			num(t, sum, "received"), num(t, sum, "missing"), sum["verify_ok"], replay, count)
	}
	if archived <= count {
		t.Errorf("the two feed handlers archived %d messages in all; want more than %d (both record)", archived, count)
	}
}

// scanArchive reads every channel's records and logs, per channel, the
// messages they hold and the records stored after a record of later
// messages of their session (out of order in the stream).
func scanArchive(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for ch := 0; ; ch++ {
		r, err := archive.OpenReader(context.Background(), archive.ReaderConfig{Feed: natsconn.DefaultFeed, Channel: ch, Conn: nc})
		if errors.Is(err, archive.ErrEmpty) || errors.Is(err, archive.ErrOutOfRange) || (err != nil && ch > 0) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var held, behind, next uint64
		var late []string
		for {
			rec, seq, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("channel %d: %v", ch, err)
				break
			}
			if rec.Kind != archive.KindPackets {
				continue
			}
			held += rec.Next - rec.First
			if rec.First < next {
				behind++
				late = append(late, strconv.FormatUint(seq, 10)+":"+strconv.FormatUint(rec.First, 10)+"-"+strconv.FormatUint(rec.Next-1, 10))
			}
			next = max(next, rec.Next)
		}
		r.Close()
		t.Logf("archive channel %d: %d messages in packet records, up to %d; %d records stored after later ones %v", ch, held, next-1, behind, late)
	}
}
