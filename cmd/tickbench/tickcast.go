package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
)

// The synthetic feed both binaries are told to use; meanMsgBytes samples the
// same one.
const (
	feedSeed        = 1
	feedInstruments = 100
	// subIdleTimeout is the subscriber's --idle-timeout. It only matters
	// when the end of session is lost; the window then excludes it.
	subIdleTimeout = 2 * time.Second
)

// natsSide is the NATS server a tickcast run uses, and so the flags that
// keep the run to itself. The zero value is the embedded server on a port
// chosen by the kernel, unknown to the subscriber (ping-pong and fan-out
// runs): recovery off, no live copy.
type natsSide struct {
	// url is an external server's URL, given to both programs as
	// --nats-url; empty: the feed handler's embedded server.
	url string
	// listen is the embedded server's --nats-listen; empty: a free port
	// (127.0.0.1:0). Set, the subscriber recovers from it (--nats-url) and
	// the feed handler keeps its live NATS copy at the default: the
	// embedded deployment as the demo and users run it.
	listen string
	// live keeps the embedded feed handler's live NATS copy on (its
	// default) where listen is empty, for a live subscriber (--live-sub).
	live bool
	// keysOnly, with listen, keeps recovery off and the live copy off as
	// the zero value does, but lets the subscriber reach the feed
	// handler's server for the keys that open its packets
	// (isolatedNATS).
	keysOnly bool
}

// keysLinger is how long the feed handler of an isolated run (keysOnly)
// stays up after its end of session: a subscriber whose NATS connection
// was still being retried when the feed handler started (every 250 ms)
// still fetches the keys of a run that lasted only milliseconds, and opens
// the packets that waited in its ring. Runs subtract it from the time
// window (linger).
const keysLinger = time.Second

// linger is the feed handler's --linger: keysLinger for an isolated run,
// else none (the summary line comes at once, and the time window is
// measured from it).
func (n natsSide) linger() time.Duration {
	if n.keysOnly {
		return keysLinger
	}
	return 0
}

// isolatedNATS is the side of the runs that want no recovery and no live
// copy (ping-pong, fan-out, throughput, day): the embedded server on a
// free port given to the subscriber, which fetches its keys there and
// recovers nothing. An older subscriber (a baseline) ignores it.
func isolatedNATS() natsSide {
	addr, err := freeTCPAddr()
	if err != nil {
		return natsSide{} // no keys: the run reports everything unverified
	}
	return natsSide{listen: addr, keysOnly: true}
}

// fhArgs are the feed handler's NATS flags and the ones every run has: no
// linger after the end of session (the summary line comes at once, and the
// time window is measured from it) and no metrics listener. Embedded: the
// server on a free port (none of the fixed 4222 that other runs on the
// host may use); on a port the kernel picks, no live copy of the feed on
// NATS (nobody could read it) unless live. External: --nats-url and
// nothing else, so recovery, the live copy (--nats-live, on by default)
// and the session record (auto: none, as the server has no JetStream) are
// the defaults users run.
func (n natsSide) fhArgs() []string {
	a := []string{"--linger", n.linger().String(), "--metrics-addr="}
	if n.url != "" {
		return append(a, "--nats-url", n.url)
	}
	a = append(a, "--nats-listen", cmp.Or(n.listen, "127.0.0.1:0"))
	if (n.listen == "" || n.keysOnly) && !n.live {
		a = append(a, "--nats-live=false")
	}
	return a
}

// subArgs are the subscriber's counterpart: no metrics listener; with a
// known server (external, or embedded on a chosen port), --nats-url and
// recovery on, its default; embedded on a port the kernel picks, no
// recovery (a loss is reported as missing).
func (n natsSide) subArgs() []string {
	switch {
	case n.url != "":
		return []string{"--nats-url", n.url, "--metrics-addr="}
	case n.keysOnly:
		return []string{"--nats-url", "nats://" + n.listen, "--recovery=false", "--metrics-addr="}
	case n.listen != "":
		return []string{"--nats-url", "nats://" + n.listen, "--metrics-addr="}
	}
	return []string{"--recovery=false", "--metrics-addr="}
}

// prepare returns this program's path (for the hidden roles), a temporary
// directory and the feed handler and subscriber built into it; the caller
// removes dir.
func prepare(ctx context.Context, progress io.Writer) (exe, dir, feedhandler, subscriber string, err error) {
	if exe, err = os.Executable(); err != nil {
		return "", "", "", "", err
	}
	if dir, err = os.MkdirTemp("", "tickbench-"); err != nil {
		return "", "", "", "", err
	}
	fmt.Fprintf(progress, "tickbench: building feedhandler and subscriber\n")
	if feedhandler, subscriber, err = buildBinaries(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return "", "", "", "", err
	}
	return exe, dir, feedhandler, subscriber, nil
}

// buildBinaries builds the feed handler and the subscriber into dir and
// returns their paths. Building (rather than running whatever is installed)
// makes the measurement about the source tree tickbench was started from.
func buildBinaries(ctx context.Context, dir string) (feedhandler, subscriber string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir,
		"github.com/tickcast/tickcast/cmd/feedhandler", "github.com/tickcast/tickcast/cmd/subscriber")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build (run tickbench from inside the tickcast module): %v\n%s", err, out)
	}
	return filepath.Join(dir, "feedhandler"), filepath.Join(dir, "subscriber"), nil
}

// buildAt builds the feed handler and the subscriber of git revision rev
// (a commit, tag or branch of the repository tickbench runs in) into dir,
// from a copy of that revision's tree made with git archive.
func buildAt(ctx context.Context, rev, dir string) (feedhandler, subscriber string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", "", err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", "", err
	}
	untar.Stdin = pipe
	var aerr strings.Builder
	archive.Stderr = &aerr
	if err := untar.Start(); err != nil {
		return "", "", fmt.Errorf("tar: %v", err)
	}
	if err := archive.Run(); err != nil {
		untar.Wait()
		return "", "", fmt.Errorf("--baseline %s: git archive: %v %s", rev, err, strings.TrimSpace(aerr.String()))
	}
	if err := untar.Wait(); err != nil {
		return "", "", fmt.Errorf("--baseline %s: tar: %v", rev, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir, "./cmd/feedhandler", "./cmd/subscriber")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("--baseline %s: go build: %v\n%s", rev, err, out)
	}
	return filepath.Join(dir, "feedhandler"), filepath.Join(dir, "subscriber"), nil
}

// meanMsgBytes returns the mean wire size of a message of the synthetic feed
// the feed handler publishes with these settings: the 2-byte MoldUDP64
// block header plus the message. The first min(count, 200000) messages are
// sampled (a fraction of a second); the mix of types is stationary after the
// definitions, so the mean is exact to well under 0.1%.
func meanMsgBytes(channels int, count uint64) (float64, error) {
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: feedSeed, Instruments: feedInstruments, Channels: channels,
		Count: min(count, 200_000)})
	if err != nil {
		return 0, err
	}
	var m feed.Msg
	var n, bytes uint64
	for src.Next(&m) == nil {
		n++
		bytes += uint64(mold.BlockHdrLen + feed.Size(m.Type))
	}
	if n == 0 {
		return 0, fmt.Errorf("synthetic feed with %d channels produced no message", channels)
	}
	return float64(bytes) / float64(n), nil
}

// tickcastConfig is one tickcast measurement.
type tickcastConfig struct {
	Feedhandler, Subscriber string // binaries
	Count                   uint64 // messages to publish
	Channels                int
	Batch                   int     // the feed handler's --send-batch
	Mode                    string  // the subscriber's --mode
	Pregenerate             bool    // the feed handler's --pregenerate: no generator in the loop
	MsgBytes                float64 // mean wire bytes of a message (meanMsgBytes)
	Timeout                 time.Duration
}

// fhSummary is the part of the feed handler's JSON summary used here.
type fhSummary struct {
	Messages      uint64  `json:"messages"`
	Packets       uint64  `json:"packets"`
	PacketBytes   uint64  `json:"packet_bytes"` // absent before the key was added: 0
	Heartbeats    uint64  `json:"heartbeats"`
	MsgsPerPacket float64 `json:"msgs_per_packet"`
	ElapsedS      float64 `json:"elapsed_s"`
	MsgsPerS      float64 `json:"msgs_per_s"`
	Interrupted   bool    `json:"interrupted"`
}

// subSummary is the part of the subscriber's JSON summary used here.
type subSummary struct {
	Received      uint64  `json:"received"`
	Packets       uint64  `json:"packets"`
	Gaps          uint64  `json:"gaps"`
	Missing       uint64  `json:"missing"`
	KernelDrops   uint64  `json:"kernel_drops"`
	RingFull      uint64  `json:"ring_full"`
	SessionsEnded uint64  `json:"sessions_ended"`
	MallocsPerMsg float64 `json:"mallocs_per_msg"`
	ElapsedS      float64 `json:"elapsed_s"`
	ExitReason    string  `json:"exit_reason"`
	OK            bool    `json:"ok"`
}

// tickcastResult is one tickcast measurement.
type tickcastResult struct {
	Mode            string  `json:"mode"`
	Group           string  `json:"group"`
	Messages        uint64  `json:"messages"` // published
	Received        uint64  `json:"received"`
	Missing         uint64  `json:"missing"` // published but not received, gaps and tail
	LossPct         float64 `json:"loss_pct"`
	Packets         uint64  `json:"packets"`      // data packets published
	PacketsRecv     uint64  `json:"packets_recv"` // data packets received
	MsgsPerPacket   float64 `json:"msgs_per_packet"`
	MeanPacketBytes float64 `json:"mean_packet_bytes"`
	KernelDrops     uint64  `json:"kernel_drops"`
	RingFull        uint64  `json:"ring_full"`
	MallocsPerMsg   float64 `json:"mallocs_per_msg"` // the subscriber's, over its whole run
	PubElapsedS     float64 `json:"pub_elapsed_s"`
	PubMsgsPerS     float64 `json:"pub_msgs_per_s"` // the feed handler's own rate
	WindowS         float64 `json:"window_s"`       // first message published to last message received
	TicksPerS       float64 `json:"ticks_per_s"`
	PacketsPerS     float64 `json:"packets_per_s"`
	BytesPerS       float64 `json:"bytes_per_s"` // MoldUDP64 payload bytes received per second
	ExitReason      string  `json:"exit_reason"` // the subscriber's
	PubCPUS         float64 `json:"pub_cpu_s"`   // CPU time of the feed handler process, user + system
	SubCPUS         float64 `json:"sub_cpu_s"`   // CPU time of the subscriber process
	// CPUPerPacketUs is both processes' CPU time per data packet
	// received, in µs (a busy-poll subscriber spins, so it counts its idle
	// time too).
	CPUPerPacketUs    float64 `json:"cpu_us_per_packet"`
	PubCPUPerPacketUs float64 `json:"pub_cpu_us_per_packet"`
	SubCPUPerPacketUs float64 `json:"sub_cpu_us_per_packet"`
	// Against the floor of the same round (zero for the warm-up run).
	PktRatio  float64 `json:"pkt_ratio,omitempty"`
	ByteRatio float64 `json:"byte_ratio,omitempty"`
	// CPURatio is the floor's CPU time per datagram over tickcast's per
	// packet: the share of tickcast's CPU cost the bare system calls
	// account for.
	CPURatio float64 `json:"cpu_ratio,omitempty"`
}

// throughputArgs returns the subscriber's and the feed handler's arguments
// for one throughput run on group g: the latency runs' arguments with the
// feed handler unpaced, sending c.Batch packets per call.
func throughputArgs(c tickcastConfig, g string, ns natsSide) (sub, fh []string) {
	sub, fh = tickcastLatArgs(g, c.Mode, c.Channels, 0, c.Count, "", ns)
	fh = append(fh, "--send-batch", strconv.Itoa(c.Batch))
	if c.Pregenerate {
		fh = append(fh, "--pregenerate")
	}
	return sub, fh
}

// runTickcast runs one subscriber and the feed handler on a fresh group and
// port, and combines their summaries.
//
// Neither summary alone gives the end-to-end rate: the subscriber's
// elapsed_s also counts the time it waited for the feed handler to start,
// and the feed handler's ends when the last packet was sent, not received.
// So the window is placed on tickbench's clock: it starts elapsed_s before
// the feed handler's summary line was read (the publisher starts its clock
// just before the first message) and ends when the subscriber's summary
// line was read (it exits as soon as the last expected message arrives).
// The pipe latency of the two lines is about the same and cancels out; what
// remains is far below a millisecond in a window of about a second.
func runTickcast(ctx context.Context, c tickcastConfig) (tickcastResult, error) {
	group, port, err := freshGroup(77, c.Channels)
	if err != nil {
		return tickcastResult{}, err
	}
	g := fmt.Sprintf("%s:%d", group, port)
	ns := isolatedNATS()
	subArgs, fhArgs := throughputArgs(c, g, ns)
	// The subscriber logs "subscribed" once it joined every group: only
	// then may the first packet go out.
	sub, err := startReady(ctx, "subscriber", c.Timeout, []string{c.Subscriber}, subArgs, `"message":"subscribed"`, 10*time.Second)
	if err != nil {
		return tickcastResult{}, err
	}
	defer sub.kill()
	var fs fhSummary
	fh, fhAt, err := runToEnd(ctx, "feedhandler", c.Timeout, []string{c.Feedhandler}, fhArgs, &fs)
	if err != nil {
		return tickcastResult{}, err
	}
	if fs.Interrupted || fs.Messages != c.Count {
		return tickcastResult{}, fh.failure(fmt.Sprintf("published %d of %d messages (interrupted %v)", fs.Messages, c.Count, fs.Interrupted))
	}
	var ss subSummary
	subAt, err := sub.summary(&ss)
	if err != nil {
		return tickcastResult{}, err
	}
	start := fhAt.Add(-time.Duration(fs.ElapsedS*float64(time.Second)) - ns.linger())
	window := subAt.Sub(start)
	if ss.ExitReason == "idle-timeout" {
		// The end of session was lost too: the subscriber sat out its
		// idle timeout after the last packet.
		window -= subIdleTimeout
	}
	r := tickcastResult{
		Mode: c.Mode, Group: g, Messages: fs.Messages, Received: ss.Received, Packets: fs.Packets,
		MsgsPerPacket: fs.MsgsPerPacket, KernelDrops: ss.KernelDrops, RingFull: ss.RingFull,
		MallocsPerMsg: ss.MallocsPerMsg, PubElapsedS: fs.ElapsedS, PubMsgsPerS: fs.MsgsPerS,
		WindowS: window.Seconds(), ExitReason: ss.ExitReason, PubCPUS: fh.cpuSeconds(), SubCPUS: sub.cpuSeconds(),
	}
	if r.Received < r.Messages {
		r.Missing = r.Messages - r.Received
	}
	r.LossPct = 100 * float64(r.Missing) / float64(max(1, r.Messages))
	// The subscriber's packets include one end of session per channel and
	// any heartbeat; count data packets only.
	if ctl := ss.SessionsEnded + fs.Heartbeats; ss.Packets > ctl {
		r.PacketsRecv = ss.Packets - ctl
	}
	if r.Packets > 0 {
		r.MeanPacketBytes = mold.HeaderLen + c.MsgBytes*float64(r.Messages)/float64(r.Packets)
	}
	if r.WindowS <= 0 || r.Received == 0 {
		return r, sub.failure(fmt.Sprintf("received %d messages in a window of %.3fs", r.Received, r.WindowS))
	}
	r.TicksPerS = float64(r.Received) / r.WindowS
	r.PacketsPerS = float64(r.PacketsRecv) / r.WindowS
	if r.PacketsRecv > 0 {
		r.PubCPUPerPacketUs = 1e6 * r.PubCPUS / float64(r.PacketsRecv)
		r.SubCPUPerPacketUs = 1e6 * r.SubCPUS / float64(r.PacketsRecv)
		r.CPUPerPacketUs = r.PubCPUPerPacketUs + r.SubCPUPerPacketUs
	}
	r.BytesPerS = (float64(r.Received)*c.MsgBytes + float64(r.PacketsRecv)*mold.HeaderLen) / r.WindowS
	return r, nil
}
