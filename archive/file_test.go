package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// fileOf writes an archive file of feed "T" with the given records (each
// a Decode-able record's bytes) and key records, keys first.
func fileOf(t testing.TB, keys []KeyRecord, records ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := NewFileWriter(&buf, "T")
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if err := fw.WriteKeys(k, uint64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range records {
		rec, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.WriteRecord(rec, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	if fw.Written() != int64(buf.Len()) {
		t.Fatalf("Written %d, the file has %d bytes", fw.Written(), buf.Len())
	}
	return buf.Bytes()
}

// readFile reads every entry of b, copying the records' bytes.
func readFile(b []byte) ([]FileEntry, error) {
	fr, err := NewFileReader(bytes.NewReader(b), "f")
	if err != nil {
		return nil, err
	}
	var out []FileEntry
	for {
		e, err := fr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		e.Record.raw = append([]byte(nil), e.Record.raw...)
		out = append(out, e)
	}
}

// TestFileRoundTrip: records and key records written to a file are read
// back in order, the records byte for byte as written, with their stream
// sequences and offsets.
func TestFileRoundTrip(t *testing.T) {
	s, _ := mold.ParseSession("ABC")
	pkts, next := packets(t, s, 1, 40)
	r1 := record(t, 0, s, pkts[:20])
	r2 := record(t, 1, s, pkts[20:])
	b := builder{buf: make([]byte, HeaderLen, 100), capBytes: 100}
	b.loss(0, s, next, next+5, 7)
	loss := append([]byte(nil), b.finish()...)
	key := KeyRecord{Session: "ABC", Channel: 1, Secret: seal.NewSecret(), Rotation: time.Second, Encrypt: true}
	data := fileOf(t, []KeyRecord{key}, r1, r2, loss)
	got, err := readFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Kind != FileKeys || got[0].StreamSeq != 100 || got[0].Keys.Channel != 1 ||
		!bytes.Equal(got[0].Keys.Secret, key.Secret) || !got[0].Keys.Encrypt || got[0].Offset != 9 {
		t.Fatalf("entries %+v", got)
	}
	for i, want := range [][]byte{r1, r2, loss} {
		e := got[i+1]
		if e.Kind != FileRecord || e.StreamSeq != uint64(i+1) || !bytes.Equal(e.Record.raw, want) || e.Offset <= got[i].Offset {
			t.Errorf("entry %d: kind %d seq %d offset %d, %d bytes; want record %d as written", i+1, e.Kind, e.StreamSeq, e.Offset, len(e.Record.raw), i+1)
		}
	}
	// Read for channel 1 only: channel 0's records are skipped.
	fr, _ := NewFileReader(bytes.NewReader(data), "f")
	fr.channel = 1
	var kinds []uint8
	for {
		e, err := fr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == FileRecord && e.Record.Channel != 1 {
			t.Fatalf("channel 1's reader returned %v", &e.Record)
		}
		kinds = append(kinds, e.Kind)
	}
	if string(kinds) != string([]uint8{FileKeys, FileRecord}) {
		t.Fatalf("channel 1's reader returned kinds %v, want a key record and a record", kinds)
	}
}

// TestFileRejects: every kind of damage is refused with an error naming
// what is wrong and at which byte; a corrupt record is reported (ErrCorrupt)
// and the entries after it are still read; damage to the framing ends the
// file (ErrBadFile).
func TestFileRejects(t *testing.T) {
	s, _ := mold.ParseSession("ABC")
	pkts, _ := packets(t, s, 1, 10)
	r1, r2 := record(t, 0, s, pkts[:5]), record(t, 0, s, pkts[5:])
	key := KeyRecord{Session: "ABC", Channel: 0, Secret: seal.NewSecret(), Rotation: time.Second}
	good := fileOf(t, []KeyRecord{key}, r1, r2)
	hdr := fileHeaderLen + 1 // "T"
	keyLen := int(binary.BigEndian.Uint32(good[hdr+4:]))
	rec1 := hdr + frameHeaderLen + keyLen // r1's frame
	rec2 := rec1 + frameHeaderLen + len(r1)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	// refix recomputes the frame checksum at off after a change.
	refix := func(b []byte, off int) []byte {
		h := b[off : off+frameHeaderLen]
		c := crc32.Update(0, castagnoli, h[:frameCRCOff])
		if h[0] == FileKeys {
			c = crc32.Update(c, castagnoli, b[off+frameHeaderLen:off+frameHeaderLen+int(binary.BigEndian.Uint32(h[4:]))])
		}
		binary.BigEndian.PutUint32(h[frameCRCOff:], c)
		return b
	}
	cases := []struct {
		name    string
		b       []byte
		corrupt bool  // ErrCorrupt, and the next record is read
		off     int64 // byte offset the error names
		want    string
	}{
		{"empty", nil, false, 0, "0 bytes, an archive file's header has 8"},
		{"short header", good[:5], false, 5, "5 bytes"},
		{"magic", mod(func(b []byte) []byte { b[0] = 'X'; return b }), false, 0, "not an archive file"},
		{"version", mod(func(b []byte) []byte { b[5] = 9; return b }), false, 4, "version 9"},
		{"feed name", mod(func(b []byte) []byte { b[8] = '.'; return b }), false, 6, "feed name"},
		{"feed name cut", good[:8], false, 8, "the feed name is cut short"},
		{"truncated frame header", good[:rec1+7], false, int64(rec1), "frame header cut short: 7 of 20"},
		{"truncated entry", good[:rec2-3], false, int64(rec1), "cut short"},
		{"frame checksum", mod(func(b []byte) []byte { b[rec1+9] ^= 1; return b }), false, int64(rec1 + frameCRCOff), "frame checksum"},
		{"key record flipped", mod(func(b []byte) []byte { b[hdr+frameHeaderLen+3] ^= 1; return b }), false, int64(hdr + frameCRCOff), "frame checksum"},
		{"unknown kind", mod(func(b []byte) []byte { b[rec1] = 7; return refix(b, rec1) }), false, int64(rec1), "entry kind 7"},
		{"reserved", mod(func(b []byte) []byte { b[rec1+2] = 1; return refix(b, rec1) }), false, int64(rec1 + 1), "reserved"},
		{"too long", mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[rec1+4:], MaxFileEntry+1); return refix(b, rec1) }), false, int64(rec1 + 4), "at most"},
		{"bad key record", mod(func(b []byte) []byte { b[hdr+frameHeaderLen] = 'x'; return refix(b, hdr) }), false, int64(hdr + frameHeaderLen), "key record"},
		{"corrupt record", mod(func(b []byte) []byte { b[rec1+frameHeaderLen+HeaderLen+5] ^= 1; return b }), true,
			int64(rec1 + frameHeaderLen + crcOff), "corrupt record: at byte 54: checksum"},
	}
	for _, c := range cases {
		_, err := readFile(c.b)
		var fe *FileError
		if err == nil || !errors.As(err, &fe) || fe.Offset != c.off || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "archive file f: at byte") {
			t.Errorf("%s: %v, want an error at byte %d naming %q", c.name, err, c.off, c.want)
			continue
		}
		if errors.Is(err, ErrCorrupt) != c.corrupt || errors.Is(err, ErrBadFile) == c.corrupt {
			t.Errorf("%s: %v: ErrCorrupt %v, ErrBadFile %v; want corrupt %v", c.name, err, errors.Is(err, ErrCorrupt), errors.Is(err, ErrBadFile), c.corrupt)
		}
		if !c.corrupt {
			continue
		}
		// The corrupt record is never delivered; the next one is.
		if fe.StreamSeq != 1 {
			t.Errorf("%s: stream message %d, want 1", c.name, fe.StreamSeq)
		}
		fr, _ := NewFileReader(bytes.NewReader(c.b), "f")
		var recs, corrupt int
		for {
			e, err := fr.Next()
			if err == io.EOF {
				break
			}
			if errors.Is(err, ErrCorrupt) {
				corrupt++
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if e.Kind == FileRecord {
				if !bytes.Equal(e.Record.raw, r2) {
					t.Errorf("%s: delivered a record that is not the undamaged one", c.name)
				}
				recs++
			}
		}
		if recs != 1 || corrupt != 1 {
			t.Errorf("%s: %d records read and %d corrupt, want 1 and 1", c.name, recs, corrupt)
		}
	}
	// A framing error is sticky: the file ends there.
	fr, _ := NewFileReader(bytes.NewReader(good[:rec2-3]), "f")
	fr.Next()
	_, err1 := fr.Next()
	_, err2 := fr.Next()
	if !errors.Is(err1, ErrBadFile) || err2 != err1 {
		t.Errorf("after a cut entry: %v then %v, want the same ErrBadFile", err1, err2)
	}
}

// TestReplayFile: sealed packets of two sessions, one channel encrypted,
// exported to a file with their key records, replay from the file with no
// NATS connection: every packet opened, byte for byte as before it was
// sealed; a replay from SESSION:SEQ starts at the packet holding it; a
// channel the file does not hold and a time after its end are refused,
// saying what it holds.
func TestReplayFile(t *testing.T) {
	var buf bytes.Buffer
	fw, err := NewFileWriter(&buf, "T")
	if err != nil {
		t.Fatal(err)
	}
	plain := make([][][]byte, 2)
	var lastNs int64
	for ch := range 2 {
		for i, name := range []string{"AAA", "BBB"} {
			s, _ := mold.ParseSession(name)
			k := KeyRecord{Session: name, Channel: ch, Secret: seal.NewSecret(), Rotation: time.Second, Encrypt: ch == 1}
			sch, _, err := k.schedule()
			if err != nil {
				t.Fatal(err)
			}
			if err := fw.WriteKeys(k, 1); err != nil {
				t.Fatal(err)
			}
			pkts, _ := packets(t, s, 1, 200+100*i)
			now := time.Now().UnixNano()
			var sealed [][]byte
			for j, p := range pkts {
				plain[ch] = append(plain[ch], p)
				sp, err := sch.Seal(append(make([]byte, 0, len(p)+seal.Overhead), p...), now+int64(j)*int64(10*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				sealed = append(sealed, sp)
			}
			for j := 0; j < len(sealed); j += 50 {
				rec, err := Decode(record(t, ch, s, sealed[j:min(j+50, len(sealed))]))
				if err != nil {
					t.Fatal(err)
				}
				lastNs = max(lastNs, rec.LastNs)
				if err := fw.WriteRecord(rec, uint64(j+1)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := fw.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.tca")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for ch := range 2 {
		got := replayAll(t, ReplayConfig{File: path}, ch)
		if len(got) != len(plain[ch]) {
			t.Fatalf("channel %d: replayed %d packets, exported %d", ch, len(got), len(plain[ch]))
		}
		for i := range got {
			if !bytes.Equal(got[i], plain[ch][i]) {
				t.Fatalf("channel %d packet %d: not the packet before it was sealed", ch, i)
			}
		}
	}
	bbb, _ := mold.ParseSession("BBB")
	got := replayAll(t, ReplayConfig{File: path, From: Position{Session: bbb, Seq: 1000}}, 1)
	h, err := mold.DecodeHeader(got[0])
	if err != nil || h.Session != bbb || h.Seq > 1000 || h.Seq+uint64(h.Messages()) <= 1000 {
		t.Fatalf("replay from BBB:1000 starts with %+v, %v", h, err)
	}
	if _, err := NewReplayReceiver(ReplayConfig{File: path}, 5, true, nil); !errors.Is(err, ErrEmpty) || !strings.Contains(err.Error(), "it holds channels [0 1]") {
		t.Errorf("replay of channel 5: %v, want ErrEmpty naming the channels held", err)
	}
	late := time.Unix(0, lastNs).Add(time.Hour)
	if _, err := NewReplayReceiver(ReplayConfig{File: path, From: Position{Time: late}}, 0, true, nil); !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), "holds records of channel 0 up to") {
		t.Errorf("replay from an hour after the end: %v, want ErrOutOfRange naming the end", err)
	}
	cut := filepath.Join(t.TempDir(), "cut.tca")
	if err := os.WriteFile(cut, buf.Bytes()[:buf.Len()-10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReplayReceiver(ReplayConfig{File: cut}, 0, true, nil); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("replay of a cut file: %v, want ErrBadFile saying it is cut short", err)
	}
}

func FuzzFile(f *testing.F) {
	s, _ := mold.ParseSession("ABC")
	pkts, next := packets(f, s, 1, 6)
	b := builder{buf: make([]byte, HeaderLen, 100), capBytes: 100}
	b.loss(0, s, next, next+5, 7)
	loss := append([]byte(nil), b.finish()...)
	key := KeyRecord{Session: "ABC", Channel: 0, Secret: make([]byte, 32), Rotation: time.Second}
	f.Add(fileOf(f, []KeyRecord{key}, record(f, 0, s, pkts[:3]), record(f, 1, s, pkts[3:]), loss))
	f.Add(fileOf(f, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ch := range []int{-1, 0} {
			fr, err := NewFileReader(bytes.NewReader(data), "f")
			if err != nil {
				if !errors.Is(err, ErrBadFile) {
					t.Fatalf("header error %v does not match ErrBadFile", err)
				}
				return
			}
			fr.channel = ch
			last := int64(-1)
			for {
				e, err := fr.Next()
				if err == io.EOF {
					break
				}
				var fe *FileError
				if err != nil && (!errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)) || errors.Is(err, ErrCorrupt) == errors.Is(err, ErrBadFile)) {
					t.Fatalf("error %v: want a *FileError within the file matching one of ErrCorrupt and ErrBadFile", err)
				}
				if errors.Is(err, ErrBadFile) {
					if _, again := fr.Next(); again != err {
						t.Fatalf("after %v, Next returned %v", err, again)
					}
					break
				}
				if err != nil {
					continue
				}
				if e.Offset <= last || e.Offset >= int64(len(data)) {
					t.Fatalf("entry at %d after one at %d, in %d bytes", e.Offset, last, len(data))
				}
				last = e.Offset
				if e.Kind == FileRecord {
					// A record delivered is a whole record that decodes.
					if _, err := Decode(e.Record.raw); err != nil || (ch >= 0 && e.Record.Channel != ch) {
						t.Fatalf("delivered record of channel %d: %v", e.Record.Channel, err)
					}
				}
			}
		}
	})
}
