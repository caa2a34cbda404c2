package tickcast_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/tickcast/tickcast"
	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/ud/udp"
)

// counter is a Handler that counts the messages released to it.
type counter struct{ messages int }

func (c *counter) Message(ch int, seq uint64, msg []byte, recvNs int64) { c.messages++ }
func (c *counter) Event(ev *tickcast.Event)                             {}

// A feed handler and a subscriber on one host: the publisher spreads a
// synthetic feed over two channels of loopback multicast, and the
// subscriber receives both channels until their sessions end.
func Example() {
	group := netip.MustParseAddrPort("239.77.201.1:31981")

	// The subscriber joins first, so that it sees every session from its
	// start. Direct mode: Run reads the sockets itself, on its own thread.
	sub, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{
		Channels:    2,
		GroupA:      group,
		NewReceiver: udp.Receivers(udp.Config{Mode: udp.Direct, CPU: -1}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{
		Channels:  2,
		GroupA:    group,
		NewSender: udp.Senders(udp.Config{CPU: -1}),
	})
	if err != nil {
		log.Fatal(err)
	}
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 1, Instruments: 10, Channels: 2, Count: 1000})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		// Run returns when the source ends; Close sends end of session.
		if err := pub.Run(ctx, src, tickcast.RunConfig{Rate: 20000}); err != nil {
			log.Print(err)
		}
		pub.Close()
	}()

	var h counter
	if err := sub.Run(ctx, &h, sub.AllEnded); err != nil {
		log.Fatal(err)
	}
	fmt.Println("received", h.messages, "messages")
	// Output: received 1000 messages
}

// A program with its own event loop publishes message by message and polls
// the subscriber itself, without Run's goroutines: Publish, Flush and End
// on the publishing side; Poll on the receiving side, which never blocks.
func ExampleSubscriber_Poll() {
	group := netip.MustParseAddrPort("239.77.202.1:31982")
	sub, err := tickcast.NewSubscriber(tickcast.SubscriberConfig{
		Channels:    1,
		GroupA:      group,
		NewReceiver: udp.Receivers(udp.Config{Mode: udp.Direct, CPU: -1}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	pub, err := tickcast.NewPublisher(tickcast.PublisherConfig{
		Channels:  1,
		GroupA:    group,
		NewSender: udp.Senders(udp.Config{CPU: -1}),
	})
	if err != nil {
		log.Fatal(err)
	}
	src, err := feed.NewSynthetic(feed.SyntheticConfig{Seed: 7, Instruments: 5, Channels: 1, Count: 200})
	if err != nil {
		log.Fatal(err)
	}

	// Publish every message of the source, then end the session. The
	// clock reading passed in is the publisher's only notion of time.
	var m feed.Msg
	for src.Next(&m) == nil {
		if err := pub.Publish(&m, tickcast.Now()); err != nil {
			log.Fatal(err)
		}
	}
	if err := pub.Close(); err != nil { // flushes and sends end of session
		log.Fatal(err)
	}

	// Poll until the session has ended (a real loop would do other work
	// between polls).
	var h counter
	deadline := time.Now().Add(5 * time.Second)
	for !sub.AllEnded() && time.Now().Before(deadline) {
		sub.Poll(&h, 64)
	}
	fmt.Println("received", h.messages, "messages; session ended:", sub.AllEnded())
	// Output: received 200 messages; session ended: true
}
