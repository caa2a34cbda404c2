package pcap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tickcast/tickcast/internal/testenv"
)

// FuzzMessages: any input, however wrong, ends in io.EOF or a *FormatError,
// never a panic or a loop; each record skipped is reported as a
// *FormatError wrapping ErrMalformed; no layer counts more than the one
// below it gave it, and every packet is counted by what became of it.
// Seeded with the real captures, their pcapng versions when editcap is
// installed, and an anonymized capture.
func FuzzMessages(f *testing.F) {
	var paths []string
	if dir, err := testenv.CaptureDir(); err == nil {
		paths, _ = filepath.Glob(filepath.Join(dir, "*.pcap"))
	}
	editcap, _ := exec.LookPath("editcap")
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
		if editcap == "" {
			continue
		}
		ng := filepath.Join(f.TempDir(), filepath.Base(p)+"ng")
		if exec.Command(editcap, "-F", "pcapng", p, ng).Run() == nil {
			if b, err := os.ReadFile(ng); err == nil {
				f.Add(b)
			}
		}
	}
	if len(paths) > 0 {
		if b, err := os.ReadFile(testenv.AnonymizeCaptures(f, "Multiple.Packets.pcap").Path); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var malformed int
		msgs, err := NewMessages(bytes.NewReader(in), Config{OnMalformed: func(err error) {
			malformed++
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrMalformed) || fe.Record < 1 {
				t.Fatalf("skipped record reported as %v", err)
			}
		}})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("NewMessages: %v is no *FormatError", err)
			}
			return
		}
		var n uint64
		for {
			msg, _, err := msgs.Next()
			if err != nil {
				var fe *FormatError
				if err != io.EOF && !errors.As(err, &fe) {
					t.Fatalf("Next: %v is neither io.EOF nor a *FormatError", err)
				}
				break
			}
			if n++; n > uint64(len(in)) {
				t.Fatalf("%d messages from %d bytes", n, len(in))
			}
			_ = msg
		}
		c, m := msgs.Counts(), msgs.MoldCounts()
		if c.Datagrams > c.Records || c.Malformed != uint64(malformed) || m.Packets+m.NotMold != c.Datagrams ||
			m.Messages != n || c.Reassembled > c.Fragments {
			t.Fatalf("counts %+v %+v after %d messages, %d reported malformed", c, m, n, malformed)
		}
		checkAccounted(t, c, m)
	})
}
