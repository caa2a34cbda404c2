package feed_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/feed"
	"github.com/tickcast/tickcast/mold"
)

const docPath = "../docs/wire-format.md"

// docVector is one ```vector block of docs/wire-format.md.
type docVector struct {
	name   string
	raw    []byte
	fields map[string]string
	order  []string
}

func parseDocVectors(doc string) ([]docVector, error) {
	var out []docVector
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```vector" {
			continue
		}
		v := docVector{fields: map[string]string{}}
		var hexText strings.Builder
		inHex := false
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			l := lines[i]
			if inHex && strings.HasPrefix(l, " ") {
				hexText.WriteString(l)
				continue
			}
			inHex = false
			k, val, ok := strings.Cut(l, ":")
			if !ok {
				return nil, fmt.Errorf("vector line %d: %q is not key: value", i+1, l)
			}
			val = strings.TrimSpace(val)
			switch k {
			case "name":
				v.name = val
			case "hex":
				hexText.WriteString(val)
				inHex = true
			default:
				if _, dup := v.fields[k]; dup {
					return nil, fmt.Errorf("vector %s: field %s twice", v.name, k)
				}
				v.fields[k] = val
				v.order = append(v.order, k)
			}
		}
		raw, err := hex.DecodeString(strings.ReplaceAll(hexText.String(), " ", ""))
		if err != nil {
			return nil, fmt.Errorf("vector %s: hex: %v", v.name, err)
		}
		v.raw = raw
		out = append(out, v)
	}
	return out, nil
}

// msgFromFields builds the message a vector's field lines describe. It uses
// every field line and fails on one it does not know, so a field added to the
// document must be checked here too.
func msgFromFields(v docVector) (feed.Msg, error) {
	var m feed.Msg
	used := 0
	num := func(k string) (int64, error) {
		s, ok := v.fields[k]
		if !ok {
			return 0, fmt.Errorf("vector %s: missing field %s", v.name, k)
		}
		used++
		n, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("vector %s: field %s: %v", v.name, k, err)
		}
		return n, nil
	}
	str := func(k string) (string, error) {
		s, ok := v.fields[k]
		if !ok {
			return "", fmt.Errorf("vector %s: missing field %s", v.name, k)
		}
		used++
		return s, nil
	}
	var errs []error
	n := func(k string) int64 { x, err := num(k); errs = append(errs, err); return x }
	s := func(k string) string { x, err := str(k); errs = append(errs, err); return x }
	ch := func(k string) byte {
		x := s(k)
		if len(x) != 1 {
			errs = append(errs, fmt.Errorf("vector %s: field %s: want one character", v.name, k))
			return 0
		}
		return x[0]
	}
	m.Type = feed.Type(ch("type"))
	m.Version = uint8(n("version"))
	m.Flags = feed.Flags(n("flags"))
	m.Instrument = uint32(n("instrument"))
	m.InstSeq = uint32(n("inst_seq"))
	m.ExchangeNs = n("exchange_ns")
	m.RecvNs = n("recv_ns")
	m.SendNs = n("send_ns")
	switch m.Type {
	case feed.TypeDefinition:
		sym, err := feed.MakeSymbol(s("symbol"))
		errs = append(errs, err)
		m.Def = feed.Definition{Symbol: sym, PriceScale: uint8(n("price_scale")), MarketCategory: ch("market_category"), RoundLot: uint32(n("round_lot"))}
	case feed.TypeQuote:
		m.Quote = feed.Quote{BidPx: n("bid_px"), BidSize: uint64(n("bid_size")), AskPx: n("ask_px"), AskSize: uint64(n("ask_size"))}
	case feed.TypeTrade:
		m.Trade = feed.Trade{Px: n("px"), Size: uint64(n("size")), MatchID: uint64(n("match_id")), Aggressor: feed.Side(ch("aggressor"))}
	case feed.TypeTradeBust:
		m.Bust = feed.TradeBust{MatchID: uint64(n("match_id"))}
	case feed.TypeStatus:
		m.Status.State = ch("state")
		copy(m.Status.Reason[:], s("reason")+"    ")
	case feed.TypeLevelDelta:
		m.Delta = feed.LevelDelta{Side: feed.Side(ch("side")), Action: ch("action"), Orders: uint32(n("orders")), Px: n("px"), Size: uint64(n("size"))}
	default:
		return m, fmt.Errorf("vector %s: unknown type %q", v.name, m.Type)
	}
	for _, err := range errs {
		if err != nil {
			return m, err
		}
	}
	if used != len(v.fields) {
		return m, fmt.Errorf("vector %s: %d field lines, %d checked", v.name, len(v.fields), used)
	}
	return m, nil
}

type encodeFunc func(m *feed.Msg, b []byte) (int, error)

// checkDoc checks every vector of doc against the codec (encode is the
// message encoder, replaceable so a test can show a codec change is caught).
func checkDoc(doc string, encode encodeFunc) (int, error) {
	vs, err := parseDocVectors(doc)
	if err != nil {
		return 0, err
	}
	byName := map[string][]byte{}
	for _, v := range vs {
		if _, isMsg := v.fields["type"]; isMsg {
			want, err := msgFromFields(v)
			if err != nil {
				return 0, err
			}
			buf := make([]byte, 256)
			n, err := encode(&want, buf)
			if err != nil {
				return 0, fmt.Errorf("vector %s: encode: %v", v.name, err)
			}
			if !bytes.Equal(buf[:n], v.raw) {
				return 0, fmt.Errorf("vector %s: codec encodes\n%x\ndocument says\n%x", v.name, buf[:n], v.raw)
			}
			var got feed.Msg
			if err := got.Decode(v.raw); err != nil {
				return 0, fmt.Errorf("vector %s: decode: %v", v.name, err)
			}
			if got != want {
				return 0, fmt.Errorf("vector %s: decodes to %+v, document says %+v", v.name, got, want)
			}
			byName[v.name] = v.raw
			continue
		}
		if err := checkMoldVector(v, byName); err != nil {
			return 0, err
		}
	}
	return len(vs), nil
}

func checkMoldVector(v docVector, byName map[string][]byte) error {
	sess, err := mold.ParseSession(v.fields["session"])
	if err != nil {
		return fmt.Errorf("vector %s: %v", v.name, err)
	}
	seq, err1 := strconv.ParseUint(v.fields["sequence"], 10, 64)
	count, err2 := strconv.ParseUint(v.fields["count"], 10, 16)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("vector %s: sequence %q count %q", v.name, v.fields["sequence"], v.fields["count"])
	}
	var want []byte
	switch v.name {
	case "heartbeat":
		want = mold.AppendHeartbeat(nil, sess, seq)
	case "end-of-session":
		want = mold.AppendEndOfSession(nil, sess, seq)
	case "re-request":
		want = mold.Request{Session: sess, Seq: seq, Count: uint16(count)}.Append(nil)
		r, err := mold.ParseRequest(v.raw)
		if err != nil || r.Session != sess || r.Seq != seq || r.Count != uint16(count) {
			return fmt.Errorf("vector %s: parses to %+v, %v", v.name, r, err)
		}
	default:
		b, _ := mold.NewBuilder(1472)
		b.Start(sess, seq)
		for _, name := range strings.Fields(v.fields["messages"]) {
			if !b.Add(byName[name]) || byName[name] == nil {
				return fmt.Errorf("vector %s: message %q unknown or too big", v.name, name)
			}
		}
		want = b.Finish()
	}
	if !bytes.Equal(want, v.raw) {
		return fmt.Errorf("vector %s: codec encodes\n%x\ndocument says\n%x", v.name, want, v.raw)
	}
	if v.name == "re-request" {
		return nil
	}
	p, err := mold.Parse(v.raw)
	if err != nil {
		return fmt.Errorf("vector %s: %v", v.name, err)
	}
	if p.Session != sess || p.Seq != seq || uint64(p.Count) != count {
		return fmt.Errorf("vector %s: parses to %+v", v.name, p.Header)
	}
	return nil
}

func realEncode(m *feed.Msg, b []byte) (int, error) { return m.Encode(b) }

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWireFormatDocument(t *testing.T) {
	n, err := checkDoc(readDoc(t), realEncode)
	if err != nil {
		t.Fatal(err)
	}
	// One vector per message type plus packet, heartbeat, end of session
	// and re-request.
	if n != 10 {
		t.Fatalf("%d vectors checked, want 10", n)
	}
}

// TestWireFormatDocumentCatchesOneByte flips every hex digit of every vector
// in a copy of the document, one at a time, and expects each copy to fail.
func TestWireFormatDocumentCatchesOneByte(t *testing.T) {
	doc := readDoc(t)
	lines := strings.Split(doc, "\n")
	flips := 0
	inHex := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "hex: "):
			inHex = true
		case inHex && strings.HasPrefix(l, "     "):
		default:
			inHex = false
		}
		if !inHex {
			continue
		}
		for j := strings.Index(l, ":") + 1; j < len(l); j++ {
			if l[j] == ' ' {
				continue
			}
			c := "1"
			if l[j] == '1' {
				c = "2"
			}
			mutated := append([]string{}, lines...)
			mutated[i] = l[:j] + c + l[j+1:]
			if _, err := checkDoc(strings.Join(mutated, "\n"), realEncode); err == nil {
				t.Fatalf("line %d: changing %q to %q at column %d went unnoticed", i+1, l[j], c, j)
			}
			flips++
		}
	}
	if flips < 1000 {
		t.Fatalf("only %d hex digits flipped", flips)
	}
	// A changed field value is caught too.
	mutated := strings.Replace(doc, "bid_size: 300", "bid_size: 301", 1)
	if _, err := checkDoc(mutated, realEncode); err == nil {
		t.Fatal("changed field value went unnoticed")
	}
}

// TestWireFormatDocumentCatchesCodecChange runs the document check with an
// encoder that changes one byte of the real codec's output, for every byte
// offset a message has.
func TestWireFormatDocumentCatchesCodecChange(t *testing.T) {
	doc := readDoc(t)
	for off := 0; off < feed.MaxLen; off++ {
		mutant := func(m *feed.Msg, b []byte) (int, error) {
			n, err := m.Encode(b)
			if off < n {
				b[off] ^= 0x01
			}
			return n, err
		}
		if _, err := checkDoc(doc, mutant); err == nil {
			t.Fatalf("an encoder that flips byte %d passes the document check", off)
		}
	}
}
