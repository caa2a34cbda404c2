package feed

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

func sampleMsgs() []Msg {
	sym, _ := MakeSymbol("AAPL")
	hdr := Header{Flags: 0, Instrument: 7, InstSeq: 42, ExchangeNs: 1767364200000001000, RecvNs: 1767364200000002000, SendNs: 1767364200000003000}
	mk := func(t Type, f Flags) Msg {
		m := Msg{Header: hdr}
		m.Type, m.Flags = t, f
		return m
	}
	def := mk(TypeDefinition, FlagProvisional)
	def.Def = Definition{Symbol: sym, PriceScale: 4, MarketCategory: 'Q', RoundLot: 100}
	q := mk(TypeQuote, FlagBidPresent|FlagAskPresent|FlagBookIncomplete)
	q.Quote = Quote{BidPx: 1_234_500, BidSize: 300, AskPx: 1_234_600, AskSize: 1 << 40}
	tr := mk(TypeTrade, FlagCross)
	tr.Trade = Trade{Px: -5, Size: 100, MatchID: 0xdeadbeefcafe, Aggressor: SideSell}
	bu := mk(TypeTradeBust, 0)
	bu.Bust = TradeBust{MatchID: 0xdeadbeefcafe}
	st := mk(TypeStatus, 0)
	st.Status = Status{State: StateHalted, Reason: [4]byte{'L', 'U', 'D', 'P'}}
	ld := mk(TypeLevelDelta, FlagBookIncomplete)
	ld.Delta = LevelDelta{Side: SideBuy, Action: ActionChange, Orders: 3, Px: 99_990_000, Size: 1200}
	return []Msg{def, q, tr, bu, st, ld}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMsgs() {
		t.Run(m.Type.String(), func(t *testing.T) {
			buf := make([]byte, 128)
			n, err := m.Encode(buf)
			if err != nil {
				t.Fatal(err)
			}
			if n != Size(m.Type) {
				t.Fatalf("encoded %d bytes, Size says %d", n, Size(m.Type))
			}
			var got Msg
			if err := got.Decode(buf[:n]); err != nil {
				t.Fatal(err)
			}
			want := m
			want.Version = Version
			if got != want {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeNewerVersionIgnoresTrailingBytes(t *testing.T) {
	for _, m := range sampleMsgs() {
		buf := make([]byte, 128)
		n, _ := m.Encode(buf)
		buf[1] = 2 // a newer version that appended 9 bytes
		for i := n; i < n+9; i++ {
			buf[i] = 0xEE
		}
		var got Msg
		if err := got.Decode(buf[:n+9]); err != nil {
			t.Fatalf("%s: %v", m.Type, err)
		}
		want := m
		want.Version = 2
		if got != want {
			t.Fatalf("%s: got %+v want %+v", m.Type, got, want)
		}
	}
}

// TestTrim: a version-1 message padded past its size (a full packet's last
// message under segmentation offload) decodes as before and Trim cuts it
// back; a newer version's longer body, an unknown type and a short message
// are left whole.
func TestTrim(t *testing.T) {
	for _, m := range sampleMsgs() {
		buf := make([]byte, 200)
		n, _ := m.Encode(buf)
		for _, pad := range []int{0, 1, 3, 100} {
			padded := buf[:n+pad]
			var got Msg
			if err := got.Decode(padded); err != nil {
				t.Fatalf("%s padded by %d: %v", m.Type, pad, err)
			}
			if got.Type != m.Type || got.InstSeq != m.InstSeq {
				t.Fatalf("%s padded by %d decodes as %+v", m.Type, pad, got.Header)
			}
			if tr := Trim(padded); len(tr) != n || &tr[0] != &padded[0] {
				t.Fatalf("%s padded by %d: Trim left %d bytes, want %d of the same buffer", m.Type, pad, len(tr), n)
			}
		}
		newer := append([]byte(nil), buf[:n+9]...)
		newer[1] = 2
		if len(Trim(newer)) != n+9 {
			t.Fatalf("%s: Trim cut a version-2 message", m.Type)
		}
	}
	unknown := make([]byte, 90)
	unknown[0], unknown[1] = 'Z', 1
	if len(Trim(unknown)) != 90 {
		t.Error("Trim cut a message of an unknown type")
	}
	for _, b := range [][]byte{nil, {'Q'}, {'Q', 1, 0}} {
		if len(Trim(b)) != len(b) {
			t.Errorf("Trim(%x) changed its length", b)
		}
	}
	testenv.NoAllocs(t, "Trim", 100, 1, func() { Trim(unknown) })
}

func TestDecodeRejectsShort(t *testing.T) {
	for _, m := range sampleMsgs() {
		buf := make([]byte, 128)
		n, _ := m.Encode(buf)
		for _, cut := range []int{n - 1, HeaderLen, HeaderLen - 1, 1} {
			var got Msg
			err := got.Decode(buf[:cut])
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("%s cut to %d: err = %v, want *DecodeError", m.Type, cut, err)
			}
			if de.Type != m.Type || de.Len != cut {
				t.Fatalf("%s cut to %d: error names type %s length %d", m.Type, cut, de.Type, de.Len)
			}
			msg := err.Error()
			if !strings.Contains(msg, m.Type.String()) || !strings.Contains(msg, itoa(cut)+" bytes") {
				t.Fatalf("%s cut to %d: message %q does not name type and length", m.Type, cut, msg)
			}
		}
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestDecodeRejectsBadTypeAndVersion(t *testing.T) {
	var m Msg
	b := make([]byte, 80)
	b[0], b[1] = 'Z', 1
	if err := m.Decode(b); err == nil || !strings.Contains(err.Error(), "unknown message type") {
		t.Fatalf("unknown type: %v", err)
	}
	b[0], b[1] = 'Q', 0
	if err := m.Decode(b); err == nil || !strings.Contains(err.Error(), "version 0") {
		t.Fatalf("version 0: %v", err)
	}
	if err := m.Decode(nil); err == nil {
		t.Fatal("empty input accepted")
	}
}

func TestEncodeErrors(t *testing.T) {
	m := sampleMsgs()[1]
	if _, err := m.Encode(make([]byte, QuoteLen-1)); err == nil || !strings.Contains(err.Error(), "buffer too short") {
		t.Fatalf("short buffer: %v", err)
	}
	m.Type = 'z'
	if _, err := m.Encode(make([]byte, 128)); err == nil {
		t.Fatal("unknown type encoded")
	}
}

func TestPutSendNs(t *testing.T) {
	m := sampleMsgs()[1]
	buf := make([]byte, QuoteLen)
	m.Encode(buf)
	PutSendNs(buf, 123456789)
	var got Msg
	if err := got.Decode(buf); err != nil {
		t.Fatal(err)
	}
	if got.SendNs != 123456789 || got.RecvNs != m.RecvNs {
		t.Fatalf("send %d recv %d", got.SendNs, got.RecvNs)
	}
}

func TestCodecAllocatesNothing(t *testing.T) {
	msgs := sampleMsgs()
	buf := make([]byte, 128)
	var got Msg
	const repeats = 20
	testenv.NoAllocs(t, "encode+decode of a message", 50, repeats*len(msgs), func() {
		for range repeats {
			for i := range msgs {
				n, err := msgs[i].Encode(buf)
				if err != nil {
					panic(err)
				}
				if err := got.Decode(buf[:n]); err != nil {
					panic(err)
				}
			}
		}
	})
}

func TestSymbol(t *testing.T) {
	s, err := MakeSymbol("MSFT")
	if err != nil || !bytes.Equal(s[:], []byte("MSFT    ")) || s.String() != "MSFT" {
		t.Fatalf("MakeSymbol: %q %v", s, err)
	}
	for _, bad := range []string{"", "TOOLONGSYM", "A B", "É"} {
		if _, err := MakeSymbol(bad); err == nil {
			t.Errorf("MakeSymbol(%q) accepted", bad)
		}
	}
}

func TestChannelOfIsTheDocumentedHash(t *testing.T) {
	// FNV-1a-64 of "AAPL    " computed by hand from the definition:
	// offset basis 0xcbf29ce484222325, prime 0x100000001b3.
	sym, _ := MakeSymbol("AAPL")
	h := uint64(0xcbf29ce484222325)
	for _, c := range []byte("AAPL    ") {
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	for _, n := range []int{1, 2, 7, 64} {
		if got, want := ChannelOf(sym, n), int(h%uint64(n)); got != want {
			t.Fatalf("ChannelOf(AAPL, %d) = %d, want %d", n, got, want)
		}
	}
	// Known values (computed outside Go), so the mapping cannot change silently.
	if h != 0xe6277f8d5fc5493b || ChannelOf(sym, 1000) != 11 || ChannelOf(sym, 7) != 6 {
		t.Fatalf("hash of AAPL = %#x, channel of 1000 = %d", h, ChannelOf(sym, 1000))
	}
}

func BenchmarkEncodeQuote(b *testing.B) {
	m := sampleMsgs()[1]
	buf := make([]byte, 128)
	b.ReportAllocs()
	for b.Loop() {
		m.Encode(buf)
	}
}

func BenchmarkDecodeQuote(b *testing.B) {
	m := sampleMsgs()[1]
	buf := make([]byte, 128)
	n, _ := m.Encode(buf)
	var got Msg
	b.ReportAllocs()
	for b.Loop() {
		got.Decode(buf[:n])
	}
}
