package upstream

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"os"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// FuzzDatagrams: any datagram, on a line or as a re-request answer, is
// either a MoldUDP64 packet the tracker takes or dropped and counted as
// malformed (a bad answer), never a panic; what Next then yields are
// messages the datagrams carried, numbered from 1, or losses.
func FuzzDatagrams(f *testing.F) {
	raw, err := os.ReadFile("../../testdata/mold/moldudp64_test_vectors.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, field := range bytes.Split(raw, []byte(`"hex": "`))[1:] {
		end := bytes.IndexByte(field, '"')
		if b, err := hex.DecodeString(string(field[:end])); err == nil {
			f.Add(b, false)
			f.Add(b, true)
		}
	}
	f.Add(packet(f, 1, 3), false)
	f.Add(packet(f, 5, 9), true)
	f.Add(mold.AppendHeartbeat(nil, testSession, 20), false)
	// Requests go to the discard port; nothing answers them.
	fd, err := Open(Config{A: netip.MustParseAddrPort("239.79.254.254:29999"), Rerequest: netip.MustParseAddrPort("127.0.0.1:9")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { fd.Close() })
	longest := 0 // the longest datagram so far: held messages come from earlier ones
	f.Fuzz(func(t *testing.T, b []byte, answer bool) {
		longest = max(longest, len(b))
		before := fd.stats
		_, perr := mold.Parse(b)
		if answer {
			fd.answer(b, fd.cfg.Clock())
		} else {
			fd.packet(1, b, 0)
		}
		switch {
		case !answer && perr != nil && fd.stats.Malformed != before.Malformed+1:
			t.Fatalf("malformed datagram not counted: %v", perr)
		case answer && perr != nil && fd.stats.BadAnswers != before.BadAnswers+1:
			t.Fatalf("malformed answer not counted: %v", perr)
		case perr == nil && (fd.stats.Malformed != before.Malformed):
			t.Fatalf("a valid packet counted malformed")
		}
		for fd.pos < len(fd.items) {
			msg, seq, err := fd.Next()
			if err == nil && (seq < 1 || len(msg) > longest) {
				t.Fatalf("message %d of %d bytes, datagrams of at most %d", seq, len(msg), longest)
			}
		}
	})
}
