package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/ud"
	"github.com/tickcast/tickcast/ud/udp"
)

// The subscriber's capacity (--sub-capacity): one subscriber fed real
// tickcast packets faster than it can take them, by a sender that does
// nothing but send them, beside the raw receiver fed the same way. The
// feed handler sets the pace in every other mode; here only the
// subscriber does.

// tickSendReport is the tick-send role's JSON line.
type tickSendReport struct {
	Messages  uint64 `json:"messages"`  // data messages in the packets
	Packets   uint64 `json:"packets"`   // data packets sent
	Bytes     uint64 `json:"bytes"`     // data packet bytes sent
	Segmented uint64 `json:"segmented"` // datagrams that went out in GSO runs
	StartNs   int64  `json:"start_ns"`  // wall clock before the first send
	EndNs     int64  `json:"end_ns"`    // wall clock after the last data packet
}

// recordSender keeps every datagram a Publisher sends, and reports that it
// segments, so that full packets are padded as a feed handler with --gso
// pads them.
type recordSender struct {
	max  int
	pkts [][]byte
}

func (r *recordSender) MaxDatagram() int { return r.max }
func (r *recordSender) Segments() bool   { return true }
func (r *recordSender) Stats() ud.SendStats {
	return ud.SendStats{Datagrams: uint64(len(r.pkts))}
}
func (r *recordSender) Close() error { return nil }
func (r *recordSender) Send(d [][]byte) error {
	for _, b := range d {
		r.pkts = append(r.pkts, append([]byte(nil), b...))
	}
	return nil
}

// tickSend is the tick-send role: it publishes --count messages of the
// synthetic feed (seed 1, 100 instruments, one channel, unsealed) into
// memory with tickcast's publisher, then sends the packets to the group
// by UDP GSO as fast as the kernel takes them, then the end of session
// three times 10 ms apart, and prints a tickSendReport.
func tickSend(args []string, stdout, stderr io.Writer) error {
	rf := newRoleFlags("tick-send")
	count := rf.fs.Uint64("count", 0, "messages to publish")
	segs := rf.fs.Int("gso", 46, "packets per send call")
	rf.size = udp.DefaultMaxDatagram
	group, err := rf.parse(args)
	if err != nil {
		return err
	}
	if *count == 0 || *count > 100_000_000 || *segs < 1 || *segs > maxGSOSegments {
		return fmt.Errorf("--count %d --gso %d: want 1..100000000 messages, 1..%d packets a call", *count, *segs, maxGSOSegments)
	}
	pkts, data, msgs, err := buildTickPackets(netip.AddrPortFrom(group, uint16(rf.port)), *count)
	if err != nil {
		return err
	}
	eos := pkts[data:]
	s, err := udp.NewSender(udp.Config{Group: group, Port: rf.port, Interface: netip.AddrFrom4(loopback), TTL: 0, CPU: -1, GSO: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.Segments() {
		return fmt.Errorf("this kernel has no UDP GSO: the sender could not outrun a subscriber")
	}
	// A pass with multicast loop off first, which delivers nothing: on
	// this kind of host the first send of memory costs several times the
	// next (measured: 0.39 M against 3.2 M datagrams/s, the kernel's side
	// of a first use), and the run is to measure the subscriber.
	warm, err := udp.NewSender(udp.Config{Group: group, Port: rf.port, Interface: netip.AddrFrom4(loopback), TTL: 0, CPU: -1, GSO: true, DisableLoop: true})
	if err != nil {
		return err
	}
	for i := 0; i < data; i += *segs {
		if err := warm.Send(pkts[i:min(i+*segs, data)]); err != nil {
			warm.Close()
			return err
		}
	}
	warm.Close()
	rep := tickSendReport{Messages: msgs, Packets: uint64(data)}
	for _, p := range pkts[:data] {
		rep.Bytes += uint64(len(p))
	}
	// Built: wait for the go (SIGUSR1), sent once the subscriber has
	// joined, so that its idle timeout does not run during the build.
	goSig := make(chan os.Signal, 1)
	signal.Notify(goSig, syscall.SIGUSR1)
	fmt.Fprintln(stderr, "tickbench tick-send: built")
	select {
	case <-goSig:
	case <-time.After(time.Minute):
		return fmt.Errorf("no go (SIGUSR1) within a minute of the build")
	}
	rep.StartNs = time.Now().UnixNano()
	for i := 0; i < data; i += *segs {
		if err := s.Send(pkts[i:min(i+*segs, data)]); err != nil {
			return err
		}
	}
	rep.EndNs = time.Now().UnixNano()
	// The end of session every 20 ms for 2 s: a subscriber that fell
	// behind drains its socket's backlog first, and the kernel drops what
	// arrives while the backlog fills the socket.
	for range 100 {
		time.Sleep(20 * time.Millisecond)
		if err := s.Send(eos); err != nil {
			return err
		}
	}
	rep.Segmented = s.Stats().Segmented
	return json.NewEncoder(stdout).Encode(&rep)
}

// buildTickPackets publishes count messages of the synthetic feed (seed
// feedSeed, feedInstruments instruments, one channel) for group ga into
// memory, unsealed, full packets padded to udp.DefaultMaxDatagram as a
// feed handler with --gso pads them. It returns every packet sent, data
// first and then the end of session, how many are data, and the messages
// they carry.
func buildTickPackets(ga netip.AddrPort, count uint64) (pkts [][]byte, data int, msgs uint64, err error) {
	rec := &recordSender{max: udp.DefaultMaxDatagram}
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{Channels: 1, GroupA: ga, SendBatch: 64,
		NewSender: func(ud.LineID) (ud.Sender, error) { return rec, nil }})
	if err != nil {
		return nil, 0, 0, err
	}
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: feedSeed, Instruments: feedInstruments, Channels: 1})
	if err != nil {
		return nil, 0, 0, err
	}
	var m feed.Msg
	for range count {
		if err := src.Next(&m); err != nil {
			return nil, 0, 0, err
		}
		if err := pub.Publish(&m, time.Now().UnixNano()); err != nil {
			return nil, 0, 0, err
		}
	}
	if err := pub.Flush(time.Now().UnixNano()); err != nil {
		return nil, 0, 0, err
	}
	data = len(rec.pkts)
	if err := pub.End(); err != nil {
		return nil, 0, 0, err
	}
	if len(rec.pkts) == data {
		return nil, 0, 0, fmt.Errorf("the publisher sent no end of session")
	}
	return rec.pkts, data, pub.Stats().Messages, nil
}

// subCapRun is one subscriber run of --sub-capacity.
type subCapRun struct {
	Round        int     `json:"round"`
	GRO          bool    `json:"gro"`
	Messages     uint64  `json:"messages"`
	Packets      uint64  `json:"packets"`
	Bytes        uint64  `json:"bytes"` // data packet bytes sent
	Received     uint64  `json:"received"`
	PacketsRecv  uint64  `json:"packets_recv"`
	KernelDrops  uint64  `json:"kernel_drops"`
	Coalesced    uint64  `json:"coalesced"`
	WindowS      float64 `json:"window_s"`
	SendS        float64 `json:"send_s"`
	TicksPerS    float64 `json:"ticks_per_s"`
	PacketsPerS  float64 `json:"packets_per_s"`
	SubCPUS      float64 `json:"sub_cpu_s"`
	CPUPerPacket float64 `json:"sub_cpu_us_per_packet"`
	CPUPerTick   float64 `json:"sub_cpu_us_per_tick"`
	ExitReason   string  `json:"exit_reason"`
}

// subCapRound is one round: the floor both ways and the subscriber both ways.
type subCapRound struct {
	Floor, FloorGRO floorResult
	Runs            []subCapRun
}

// subCapResult is the --sub-capacity result.
type subCapResult struct {
	Messages   uint64        `json:"messages"`
	FloorCount uint64        `json:"floor_count"`
	FloorSize  int           `json:"floor_size"`
	Rounds     []subCapRound `json:"rounds"`
}

// runSubCap runs one subscriber (with --gro or without) against tick-send.
func runSubCap(ctx context.Context, exe, subBin string, count uint64, gro bool, timeout time.Duration) (subCapRun, error) {
	group, port, err := freshGroup(77, 1)
	if err != nil {
		return subCapRun{}, err
	}
	g := fmt.Sprintf("%s:%d", group, port)
	subArgs := []string{"--group", g, "--iface", "127.0.0.1", "--channels", "1", "--expect", strconv.FormatUint(count, 10),
		"--mode", "direct", "--cpu", "-1", "--idle-timeout", subIdleTimeout.String(), "--format", "none",
		"--log-format", "json", "--log-level", "info", "--recovery=false", "--auth=false"}
	if gro {
		subArgs = append(subArgs, "--gro")
	}
	send, err := startReady(ctx, "tick-send", timeout, []string{exe},
		[]string{"--role", "tick-send", "--group", group.String(), "--port", strconv.Itoa(port), "--count", strconv.FormatUint(count, 10)},
		"tick-send: built", time.Minute)
	if err != nil {
		return subCapRun{}, err
	}
	defer send.kill()
	sub, err := startReady(ctx, "subscriber", timeout, []string{subBin}, subArgs, `"message":"subscribed"`, 10*time.Second)
	if err != nil {
		return subCapRun{}, err
	}
	defer sub.kill()
	if err := send.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return subCapRun{}, err
	}
	var sr tickSendReport
	if _, err := send.summary(&sr); err != nil {
		return subCapRun{}, err
	}
	var ss struct {
		subSummary
		Coalesced uint64 `json:"coalesced"`
	}
	at, err := sub.summary(&ss)
	if err != nil {
		return subCapRun{}, err
	}
	r := subCapRun{GRO: gro, Messages: sr.Messages, Packets: sr.Packets, Bytes: sr.Bytes, Received: ss.Received, KernelDrops: ss.KernelDrops,
		Coalesced: ss.Coalesced, SendS: time.Duration(sr.EndNs - sr.StartNs).Seconds(), SubCPUS: sub.cpuSeconds(), ExitReason: ss.ExitReason}
	if ss.Packets > ss.SessionsEnded {
		r.PacketsRecv = ss.Packets - ss.SessionsEnded
	}
	end := at
	if ss.ExitReason == "idle-timeout" {
		end = end.Add(-subIdleTimeout)
	}
	r.WindowS = end.Sub(time.Unix(0, sr.StartNs)).Seconds()
	if r.WindowS <= 0 || r.Received == 0 || r.PacketsRecv == 0 {
		return r, sub.failure(fmt.Sprintf("received %d messages in %d packets in a window of %.3fs", r.Received, r.PacketsRecv, r.WindowS))
	}
	r.TicksPerS = float64(r.Received) / r.WindowS
	r.PacketsPerS = float64(r.PacketsRecv) / r.WindowS
	r.CPUPerPacket = 1e6 * r.SubCPUS / float64(r.PacketsRecv)
	r.CPUPerTick = 1e6 * r.SubCPUS / float64(r.Received)
	return r, nil
}

// measureSubCap runs the rounds of --sub-capacity.
func measureSubCap(ctx context.Context, s settings, progress io.Writer) (*subCapResult, error) {
	exe, dir, _, subBin, err := prepare(ctx, progress)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &subCapResult{Messages: s.count}
	fmt.Fprintf(progress, "tickbench: warm-up: %d messages to one subscriber\n", s.count)
	warm, err := runSubCap(ctx, exe, subBin, s.count, false, s.timeout)
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	res.FloorCount, res.FloorSize = warm.Packets, int(warm.Bytes/max(1, warm.Packets))
	fc := floorConfig{Exe: []string{exe}, Count: res.FloorCount, Size: res.FloorSize, Batch: s.batch, Timeout: s.timeout,
		GSO: min(maxGSOSegments, maxGSOBytes/max(1, res.FloorSize))}
	for i := 1; i <= s.repeat; i++ {
		var rd subCapRound
		fmt.Fprintf(progress, "tickbench: round %d/%d:", i, s.repeat)
		if rd.Floor, err = runFloor(ctx, fc); err != nil {
			return nil, fmt.Errorf("round %d: floor: %w", i, err)
		}
		g := fc
		g.GRO = true
		if rd.FloorGRO, err = runFloor(ctx, g); err != nil {
			return nil, fmt.Errorf("round %d: floor with GRO: %w", i, err)
		}
		fmt.Fprintf(progress, " floor %.0fk dg/s, with GRO %.0fk", rd.Floor.DgramsPerS/1e3, rd.FloorGRO.DgramsPerS/1e3)
		for _, gro := range []bool{false, true} {
			r, err := runSubCap(ctx, exe, subBin, s.count, gro, s.timeout)
			if err != nil {
				return nil, fmt.Errorf("round %d: subscriber (gro %v): %w", i, gro, err)
			}
			r.Round = i
			fmt.Fprintf(progress, "; subscriber%s %.2fM ticks/s", map[bool]string{true: " --gro"}[gro], r.TicksPerS/1e6)
			rd.Runs = append(rd.Runs, r)
		}
		fmt.Fprintln(progress)
		res.Rounds = append(res.Rounds, rd)
	}
	return res, nil
}

// printSubCap writes the --sub-capacity table: medians and ranges over the rounds.
func printSubCap(w io.Writer, r *subCapResult) {
	fmt.Fprintf(w, "Subscriber capacity: %d messages of the synthetic feed in %d packets (%d B mean), sent by UDP GSO as fast as the kernel takes them; median [min–max] over %d rounds\n\n",
		r.Messages, r.FloorCount, r.FloorSize, len(r.Rounds))
	fmt.Fprintln(w, "| receiver | datagrams (packets)/s | ticks/s | received | CPU µs/packet | CPU µs/tick | × raw receiver CPU |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	type col struct{ rate, recv, cpu []float64 }
	var floor, floorGRO col
	for _, rd := range r.Rounds {
		for c, f := range map[*col]floorResult{&floor: rd.Floor, &floorGRO: rd.FloorGRO} {
			c.rate = append(c.rate, f.DgramsPerS)
			c.recv = append(c.recv, 100*float64(f.Received)/float64(max(1, f.Sent)))
			c.cpu = append(c.cpu, f.RecvCPUPerDgramUs)
		}
	}
	fmt.Fprintf(w, "| raw recvmmsg | %s | | %s%% | %s | | |\n", spread(floor.rate, 1e-3, "%.0fk"), spread(floor.recv, 1, "%.1f"), spread(floor.cpu, 1, "%.2f"))
	fmt.Fprintf(w, "| raw recvmmsg, UDP GRO | %s | | %s%% | %s | | |\n", spread(floorGRO.rate, 1e-3, "%.0fk"), spread(floorGRO.recv, 1, "%.1f"), spread(floorGRO.cpu, 1, "%.2f"))
	for _, gro := range []bool{false, true} {
		var rate, ticks, recv, cpu, tick, ratio []float64
		for _, rd := range r.Rounds {
			fl := rd.Floor
			if gro {
				fl = rd.FloorGRO
			}
			for _, run := range rd.Runs {
				if run.GRO != gro {
					continue
				}
				rate, ticks = append(rate, run.PacketsPerS), append(ticks, run.TicksPerS)
				recv = append(recv, 100*float64(run.Received)/float64(max(1, run.Messages)))
				cpu, tick = append(cpu, run.CPUPerPacket), append(tick, run.CPUPerTick)
				if fl.RecvCPUPerDgramUs > 0 {
					ratio = append(ratio, run.CPUPerPacket/fl.RecvCPUPerDgramUs)
				}
			}
		}
		name := "subscriber (direct)"
		if gro {
			name = "subscriber (direct) --gro"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s%% | %s | %s | %s |\n", name, spread(rate, 1e-3, "%.0fk"), spread(ticks, 1e-6, "%.2fM"),
			spread(recv, 1, "%.1f"), spread(cpu, 1, "%.2f"), spread(tick, 1, "%.3f"), spread(ratio, 1, "%.2f"))
	}
	fmt.Fprintln(w, "\nreceived: the share of what was sent that arrived (the kernel drops the rest when its receiver falls behind).")
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runSubCapMain is --sub-capacity: it measures and prints the result.
func runSubCapMain(ctx context.Context, s settings, set map[string]bool, stdout, stderr io.Writer) int {
	if !set["count"] {
		s.count = 4_000_000
	}
	s.channels = 1
	if err := s.validate(); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 2
	}
	res, err := measureSubCap(ctx, s, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	if err := emit(res, s.out, s.json, stdout, func(w io.Writer) { printSubCap(w, res) }); err != nil {
		fmt.Fprintf(stderr, "tickbench: %v\n", err)
		return 1
	}
	return 0
}
