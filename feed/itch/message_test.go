package itch

import (
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

const (
	snippetPath = "../../testdata/itch/12302019_SNIPPET.NASDAQ_ITCH50"
	decodedPath = "../../testdata/itch/12302019_SNIPPET.decoded.csv"
	vectorsPath = "../../testdata/itch/itch50_test_vectors.json"
)

// snippet returns the snippet's messages, copied out of the reader.
func snippet(t testing.TB) [][]byte {
	t.Helper()
	f, err := os.Open(snippetPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readAll(t, f)
}

// readAll returns the messages of r, in NASDAQ's file format, copied out
// of the Reader; a framing error fails the test.
func readAll(t testing.TB, r io.Reader) [][]byte {
	t.Helper()
	rd := NewReader(r)
	var msgs [][]byte
	for {
		b, _, err := rd.Next()
		if err == io.EOF {
			return msgs
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, bytes.Clone(b))
	}
}

// px formats a Price(4) as the independent decode does: decimal, trailing
// zeros and point dropped.
func px(p uint32) string {
	s := fmt.Sprintf("%d.%04d", p/10000, p%10000)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func u[T uint16 | uint32 | uint64 | int64](v T) string { return strconv.FormatUint(uint64(v), 10) }

// columns returns the decoded.csv columns of m, as this package decodes it.
func columns(m Message) map[string]string {
	c := map[string]string{
		"type": string(rune(m.Type())), "len": strconv.Itoa(len(m)), "stocklocate": u(m.StockLocate()),
		"trackingnumber": u(m.TrackingNumber()), "timestamp": u(m.Timestamp()),
	}
	if sym, ok := m.Stock(); ok {
		c["stock"] = sym.String()
	}
	switch m.Type() {
	case TypeSystemEvent:
		c["eventcode"] = string(m.SystemEvent().EventCode())
	case TypeAddOrder, TypeAddOrderMPID:
		a := m.AddOrder()
		c["orderreferencenumber"] = u(a.OrderRef())
		c["buysellindicator"] = string(a.Side())
		c["shares"] = u(a.Shares())
		c["price"] = px(a.Price())
		if mpid, ok := a.Attribution(); ok {
			c["attribution"] = string(mpid[:])
		}
	case TypeOrderExecuted, TypeOrderExecutedPrice:
		e := m.OrderExecuted()
		c["orderreferencenumber"] = u(e.OrderRef())
		c["executedshares"] = u(e.Shares())
		c["matchnumber"] = u(e.MatchNumber())
		if printable, p, ok := e.WithPrice(); ok {
			c["printable"] = string(printable)
			c["executionprice"] = px(p)
		}
	case TypeOrderCancel:
		x := m.OrderCancel()
		c["orderreferencenumber"] = u(x.OrderRef())
		c["canceledshares"] = u(x.Shares())
	case TypeOrderDelete:
		c["orderreferencenumber"] = u(m.OrderDelete().OrderRef())
	case TypeOrderReplace:
		r := m.OrderReplace()
		c["originalorderreferencenumber"] = u(r.OriginalRef())
		c["neworderreferencenumber"] = u(r.NewRef())
		c["shares"] = u(r.Shares())
		c["price"] = px(r.Price())
	case TypeTrade:
		p := m.Trade()
		c["orderreferencenumber"] = u(p.OrderRef())
		c["buysellindicator"] = string(p.Side())
		c["shares"] = u(p.Shares())
		c["price"] = px(p.Price())
		c["matchnumber"] = u(p.MatchNumber())
	case TypeCrossTrade:
		q := m.CrossTrade()
		c["crossshares"] = u(q.Shares())
		c["crossprice"] = px(q.Price())
		c["matchnumber"] = u(q.MatchNumber())
		c["crosstype"] = string(q.CrossType())
	case TypeNOII:
		n := m.NOII()
		c["pairedshares"] = u(n.PairedShares())
		c["imbalanceshares"] = u(n.ImbalanceShares())
		c["imbalancedirection"] = string(n.ImbalanceDirection())
		c["farprice"] = px(n.FarPrice())
		c["nearprice"] = px(n.NearPrice())
		c["currentreferenceprice"] = px(n.CurrentReferencePrice())
		c["crosstype"] = string(n.CrossType())
		c["pricevariationindicator"] = string(n.PriceVariationIndicator())
	}
	return c
}

// TestSnippetMatchesIndependentDecode decodes all 1000 real messages and
// compares every field with the independent decode, column by column.
func TestSnippetMatchesIndependentDecode(t *testing.T) {
	msgs := snippet(t)
	f, err := os.Open(decodedPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head, rows := rows[0], rows[1:]
	if len(rows) != 1000 || len(msgs) != 1000 {
		t.Fatalf("%d decoded rows and %d messages, want 1000 of each", len(rows), len(msgs))
	}
	checked := 0
	for i, row := range rows {
		if row[0] != strconv.Itoa(i+1) {
			t.Fatalf("row %d has moldseq %s", i+1, row[0])
		}
		m, err := Parse(msgs[i])
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		got := columns(m)
		for j, name := range head[1:] {
			want := row[j+1]
			if got[name] != want {
				t.Errorf("message %d (%s) %s: got %q, independent decode %q", i+1, m.Type(), name, got[name], want)
			}
			if want != "" {
				checked++
			}
			delete(got, name)
		}
		if len(got) > 0 {
			t.Errorf("message %d: fields %v not in the independent decode", i+1, got)
		}
	}
	t.Logf("%d non-empty fields match", checked)
}

type vector struct {
	Name     string         `json:"name"`
	Hex      string         `json:"hex"`
	Expected map[string]any `json:"expected"`
}

// TestSpecVectors decodes every vector and checks each asserted value.
func TestSpecVectors(t *testing.T) {
	b, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	seen := map[Type]bool{}
	for _, v := range vs {
		raw, err := hex.DecodeString(v.Hex)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if _, framed := v.Expected["framing"]; framed {
			continue // TestFramedVectors
		}
		m, err := Parse(raw)
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		seen[m.Type()] = true
		got := vectorFields(m)
		for k, want := range v.Expected {
			g, ok := got[k]
			if !ok {
				t.Errorf("%s: field %s not decoded", v.Name, k)
				continue
			}
			if w := fmt.Sprint(want); g != w {
				t.Errorf("%s: %s = %q, want %q", v.Name, k, g, w)
			}
		}
	}
	for _, c := range "SRHYLVWKAFECXDUPQBI" {
		if !seen[Type(c)] {
			t.Errorf("no vector of type %c", c)
		}
	}
}

func s1(b byte) string { return string(rune(b)) }

// vectorFields names m's fields as the vectors file does; numbers in
// decimal as encoding/json's float64 prints them.
func vectorFields(m Message) map[string]string {
	n := func(v uint64) string { return fmt.Sprint(float64(v)) }
	f := map[string]string{
		"type": s1(byte(m.Type())), "length": n(uint64(len(m))), "stock_locate": n(uint64(m.StockLocate())),
		"tracking_number": n(uint64(m.TrackingNumber())), "timestamp_ns": n(uint64(m.Timestamp())),
	}
	if sym, ok := m.Stock(); ok {
		f["stock"] = sym.String()
	}
	price := func(k string, p uint32) {
		f[k+"4"] = n(uint64(p))
		f[k] = fmt.Sprintf("%d.%04d", p/10000, p%10000)
	}
	switch m.Type() {
	case TypeSystemEvent:
		f["event_code"] = s1(m.SystemEvent().EventCode())
	case TypeStockDirectory:
		r := m.StockDirectory()
		f["market_category"] = s1(r.MarketCategory())
		f["financial_status"] = s1(r.FinancialStatus())
		f["round_lot_size"] = n(uint64(r.RoundLotSize()))
		f["round_lots_only"] = s1(r.RoundLotsOnly())
		f["issue_classification"] = s1(r.IssueClassification())
		st := r.IssueSubType()
		f["issue_subtype"] = string(st[:])
		f["authenticity"] = s1(r.Authenticity())
		f["short_sale_threshold"] = s1(r.ShortSaleThreshold())
		f["ipo_flag"] = s1(r.IPOFlag())
		f["luld_ref_price_tier"] = s1(r.LULDReferencePriceTier())
		f["etp_flag"] = s1(r.ETPFlag())
		f["etp_leverage_factor"] = n(uint64(r.ETPLeverageFactor()))
		f["inverse_indicator"] = s1(r.InverseIndicator())
	case TypeTradingAction:
		a := m.TradingAction()
		f["trading_state"] = s1(a.TradingState())
		f["reserved"] = fmt.Sprintf(`\x%02x`, a.Reserved())
		r := a.Reason()
		f["reason"] = string(r[:])
	case TypeRegSHO:
		f["reg_sho_action"] = s1(m.RegSHO().Action())
	case TypeParticipantPosition:
		l := m.ParticipantPosition()
		id := l.MPID()
		f["mpid"] = string(id[:])
		f["primary_market_maker"] = s1(l.PrimaryMarketMaker())
		f["market_maker_mode"] = s1(l.MarketMakerMode())
		f["market_participant_state"] = s1(l.ParticipantState())
	case TypeMWCBDeclineLevel:
		v := m.MWCBDeclineLevel()
		for i, p := range []uint64{v.Level1Price8(), v.Level2Price8(), v.Level3Price8()} {
			k := fmt.Sprintf("level%d", i+1)
			f[k+"_price8"] = n(p)
			s := strings.TrimRight(fmt.Sprintf("%d.%08d", p/1e8, p%1e8), "0")
			f[k] = strings.TrimSuffix(s, ".")
		}
	case TypeMWCBStatus:
		f["breached_level"] = s1(m.MWCBStatus().BreachedLevel())
	case TypeIPOQuotingPeriod:
		k := m.IPOQuotingPeriod()
		f["ipo_release_time_s"] = n(uint64(k.ReleaseTime()))
		f["ipo_release_qualifier"] = s1(k.ReleaseQualifier())
		price("ipo_price", k.Price())
	case TypeAddOrder, TypeAddOrderMPID:
		a := m.AddOrder()
		f["order_ref"] = n(a.OrderRef())
		f["side"] = s1(a.Side())
		f["shares"] = n(uint64(a.Shares()))
		price("price", a.Price())
		if id, ok := a.Attribution(); ok {
			f["attribution"] = string(id[:])
		}
	case TypeOrderExecuted, TypeOrderExecutedPrice:
		e := m.OrderExecuted()
		f["order_ref"] = n(e.OrderRef())
		f["executed_shares"] = n(uint64(e.Shares()))
		f["match_number"] = n(e.MatchNumber())
		if pr, p, ok := e.WithPrice(); ok {
			f["printable"] = s1(pr)
			price("execution_price", p)
		}
	case TypeOrderCancel:
		x := m.OrderCancel()
		f["order_ref"] = n(x.OrderRef())
		f["canceled_shares"] = n(uint64(x.Shares()))
	case TypeOrderDelete:
		f["order_ref"] = n(m.OrderDelete().OrderRef())
	case TypeOrderReplace:
		r := m.OrderReplace()
		f["original_order_ref"] = n(r.OriginalRef())
		f["new_order_ref"] = n(r.NewRef())
		f["shares"] = n(uint64(r.Shares()))
		price("price", r.Price())
	case TypeTrade:
		p := m.Trade()
		f["order_ref"] = n(p.OrderRef())
		f["side"] = s1(p.Side())
		f["shares"] = n(uint64(p.Shares()))
		price("price", p.Price())
		f["match_number"] = n(p.MatchNumber())
	case TypeCrossTrade:
		q := m.CrossTrade()
		f["shares"] = n(q.Shares())
		price("cross_price", q.Price())
		f["match_number"] = n(q.MatchNumber())
		f["cross_type"] = s1(q.CrossType())
	case TypeBrokenTrade:
		f["match_number"] = n(m.BrokenTrade().MatchNumber())
	case TypeNOII:
		i := m.NOII()
		f["paired_shares"] = n(i.PairedShares())
		f["imbalance_shares"] = n(i.ImbalanceShares())
		f["imbalance_direction"] = s1(i.ImbalanceDirection())
		price("far_price", i.FarPrice())
		price("near_price", i.NearPrice())
		price("current_reference_price", i.CurrentReferencePrice())
		f["cross_type"] = s1(i.CrossType())
		f["price_variation_indicator"] = s1(i.PriceVariationIndicator())
	}
	return f
}

// TestFramedVectors reads the length-prefixed vectors: one whole message,
// then the end; and a truncated one, which is an error naming its offset.
func TestFramedVectors(t *testing.T) {
	one, _ := hex.DecodeString("000c5300000000286aab3b3a994f")
	r := NewReader(strings.NewReader(string(one)))
	b, off, err := r.Next()
	if err != nil || off != 0 {
		t.Fatalf("one message: offset %d, %v", off, err)
	}
	m, err := Parse(b)
	if err != nil || m.Type() != TypeSystemEvent || m.Timestamp() != 44438604429977 || m.SystemEvent().EventCode() != 'O' {
		t.Fatalf("one message: %x %v", b, err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the message: %v, want io.EOF", err)
	}

	trunc, _ := hex.DecodeString("000c53000000286a")
	r = NewReader(strings.NewReader(string(trunc)))
	_, _, err = r.Next()
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, io.ErrUnexpectedEOF) || fe.Offset != 0 || fe.Type != TypeSystemEvent || fe.Want != 12 || fe.Len != 6 {
		t.Fatalf("truncated: %v (%+v), want a FormatError at offset 0 wrapping io.ErrUnexpectedEOF", err, fe)
	}
	if !strings.Contains(err.Error(), "'S' system event") || !strings.Contains(err.Error(), "offset 0") {
		t.Errorf("error %q does not name the type and offset", err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the truncated message: %v, want io.EOF", err)
	}
}

// TestParseLengths checks that every type is accepted at its size only, and
// that other types are reported unknown.
func TestParseLengths(t *testing.T) {
	for _, typ := range Types() {
		n := Size(typ)
		b := make([]byte, n+1)
		b[0] = byte(typ)
		if _, err := Parse(b[:n]); err != nil {
			t.Errorf("%s at %d bytes: %v", typ, n, err)
		}
		for _, l := range []int{1, n - 1, n + 1} {
			_, err := Parse(b[:l])
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Type != typ || fe.Want != n || fe.Len != l || fe.Field != "length" {
				t.Errorf("%s at %d bytes: %v, want a length error", typ, l, err)
			}
		}
	}
	if _, err := Parse([]byte{'Z', 0, 0}); err != ErrUnknownType {
		t.Errorf("type Z: %v, want ErrUnknownType", err)
	}
	if len(Types()) != 23 {
		t.Errorf("%d types", len(Types()))
	}
	for t2 := range 256 {
		known := false
		for _, typ := range Types() {
			known = known || Type(t2) == typ
		}
		if known != (Size(Type(t2)) > 0) {
			t.Errorf("type 0x%02x: in Types() %v, size %d", t2, known, Size(Type(t2)))
		}
	}
}

// TestDLCR checks the DLCR layout field by field on a built message.
func TestDLCR(t *testing.T) {
	b := []byte{'O', 0, 7, 0, 1, 0, 0, 0, 0, 0, 9}
	b = append(b, "ABCD    "...)
	b = append(b, 'Y')
	for _, v := range []uint32{1000000, 2000000, 1500000} {
		b = be.AppendUint32(b, v)
	}
	b = be.AppendUint64(b, 34200000000000)
	b = be.AppendUint32(b, 1400000)
	b = be.AppendUint32(b, 1600000)
	m, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	d := m.DLCR()
	sym, _ := m.Stock()
	if d.Stock().String() != "ABCD" || sym != d.Stock() || d.OpenEligibility() != 'Y' || d.MinimumAllowablePrice() != 1000000 ||
		d.MaximumAllowablePrice() != 2000000 || d.NearExecutionPrice() != 1500000 || d.NearExecutionTime() != 34200000000000 ||
		d.LowerPriceRangeCollar() != 1400000 || d.UpperPriceRangeCollar() != 1600000 || m.StockLocate() != 7 || m.Timestamp() != 9 {
		t.Errorf("DLCR decoded wrong: %x", b)
	}
}
