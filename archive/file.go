package archive

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// An archive file holds a range of a feed's archive outside JetStream, so
// that a replay needs no NATS server: the records exactly as the stream
// stores them (each still passes Decode, its CRC included) and the key
// records that open their sealed packets.
//
// Layout, big-endian:
//
//	file header:
//	 0  4  magic "TCAF"
//	 4  2  version, 1
//	 6  2  length of the feed name, 1..255
//	 8  n  the feed name
//
//	then entries, each a 20-byte frame header and a body:
//	 0  1  kind: FileRecord or FileKeys
//	 1  3  reserved, 0
//	 4  4  length of the body, at most MaxFileEntry
//	 8  8  the entry's sequence in the archive's stream (0: not known)
//	16  4  CRC-32C of bytes 0..15 and, for FileKeys, of the body
//	20     body: a record (Decode), or a KeyRecord as JSON
//
// A record's body is covered by the record's own checksum, so damage inside
// it is reported by Decode as a corrupt record, and the entries after it
// are still read; damage to a frame header, or a key record, ends the file.
const (
	fileMagic      = "TCAF"
	fileVersion    = 1
	fileHeaderLen  = 8
	frameHeaderLen = 20
	frameCRCOff    = 16
	// MaxFileEntry is the longest entry body a file holds: a record is at
	// most 1 MiB (RecorderConfig.RecordBytes).
	MaxFileEntry = 4 << 20
)

// Entry kinds of an archive file.
const (
	// FileRecord is a record as stored in the archive's stream.
	FileRecord = 1
	// FileKeys is a channel's key record of one session (KeyRecord).
	FileKeys = 2
)

// ErrBadFile is matched (errors.Is) by the error of a file that is not an
// archive file, or whose framing is damaged or cut short.
var ErrBadFile = errors.New("archive: bad archive file")

// FileError says what is wrong with an archive file and at which byte. Its
// Err matches ErrCorrupt for a record that failed Decode (the file can be
// read on past it), and ErrBadFile otherwise (the file ends there).
type FileError struct {
	Name      string // the file, as named to the reader
	Offset    int64  // byte offset of the fault in the file
	StreamSeq uint64 // the entry's sequence in the stream, if known
	Err       error
}

func (e *FileError) Error() string {
	seq := ""
	if e.StreamSeq > 0 {
		seq = fmt.Sprintf(" (stream message %d)", e.StreamSeq)
	}
	return fmt.Sprintf("archive file %s: at byte %d%s: %v", e.Name, e.Offset, seq, e.Err)
}

// Unwrap returns the error: a *DecodeError (ErrCorrupt) or one wrapping
// ErrBadFile.
func (e *FileError) Unwrap() error { return e.Err }

// badFile is the detail of a FileError that ends the file.
func badFile(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadFile, fmt.Sprintf(format, args...))
}

// Bytes returns the record exactly as stored: what Decode was given.
func (r *Record) Bytes() []byte { return r.raw }

// FileWriter writes an archive file: NewFileWriter writes the header, then
// each WriteRecord and WriteKeys an entry. Flush when done.
type FileWriter struct {
	w   *bufio.Writer
	hdr [frameHeaderLen]byte
	err error
	n   int64 // bytes written
}

// NewFileWriter writes the header of an archive file of feed to w.
func NewFileWriter(w io.Writer, feed string) (*FileWriter, error) {
	if !validFeed(feed) || len(feed) > 255 {
		return nil, fmt.Errorf("archive: feed %q: want 1 to 255 letters, digits, '-' or '_'", feed)
	}
	fw := &FileWriter{w: bufio.NewWriterSize(w, 1<<20)}
	h := make([]byte, fileHeaderLen, fileHeaderLen+len(feed))
	copy(h, fileMagic)
	binary.BigEndian.PutUint16(h[4:], fileVersion)
	binary.BigEndian.PutUint16(h[6:], uint16(len(feed)))
	fw.write(append(h, feed...))
	return fw, fw.err
}

func (fw *FileWriter) write(b []byte) {
	if fw.err != nil {
		return
	}
	var n int
	n, fw.err = fw.w.Write(b)
	fw.n += int64(n)
}

// entry writes one frame.
func (fw *FileWriter) entry(kind uint8, streamSeq uint64, body []byte) error {
	if len(body) > MaxFileEntry {
		return fmt.Errorf("archive: file entry of %d bytes, at most %d", len(body), MaxFileEntry)
	}
	h := fw.hdr[:]
	clear(h)
	h[0] = kind
	binary.BigEndian.PutUint32(h[4:], uint32(len(body)))
	binary.BigEndian.PutUint64(h[8:], streamSeq)
	c := crc32.Update(0, castagnoli, h[:frameCRCOff])
	if kind == FileKeys {
		c = crc32.Update(c, castagnoli, body)
	}
	binary.BigEndian.PutUint32(h[frameCRCOff:], c)
	fw.write(h)
	fw.write(body)
	return fw.err
}

// WriteRecord writes rec exactly as it was decoded (Decode's input),
// with its sequence in the stream (0 if not known).
func (fw *FileWriter) WriteRecord(rec Record, streamSeq uint64) error {
	if rec.raw == nil {
		return errors.New("archive: WriteRecord: a record that was not decoded")
	}
	return fw.entry(FileRecord, streamSeq, rec.raw)
}

// WriteKeys writes a key record.
func (fw *FileWriter) WriteKeys(k KeyRecord, streamSeq uint64) error {
	if _, _, err := k.schedule(); err != nil {
		return fmt.Errorf("archive: key record of channel %d session %s: %w", k.Channel, k.Session, err)
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return fw.entry(FileKeys, streamSeq, b)
}

// Written returns the bytes written so far, buffered ones included.
func (fw *FileWriter) Written() int64 { return fw.n }

// Flush writes out what is buffered.
func (fw *FileWriter) Flush() error {
	if fw.err != nil {
		return fw.err
	}
	fw.err = fw.w.Flush()
	return fw.err
}

// FileEntry is one entry of an archive file.
type FileEntry struct {
	Kind      uint8 // FileRecord or FileKeys
	Offset    int64 // byte offset of the entry's frame in the file
	StreamSeq uint64
	// Record is a FileRecord's record; it aliases the reader's buffer,
	// valid until the next call to Next.
	Record Record
	// Keys is a FileKeys entry's key record.
	Keys KeyRecord
}

// FileReader reads an archive file's entries in order. Every entry is
// checked: a record as Decode checks it, a key record as the archive's
// reader does.
type FileReader struct {
	r    *bufio.Reader
	name string
	feed string
	off  int64
	hdr  [frameHeaderLen]byte
	buf  []byte
	err  error // sticky: the file ends
	// channel, if not negative, is the only channel whose records Next
	// decodes and returns; the others are skipped unread.
	channel int
}

// NewFileReader reads the header of the archive file r, named name in
// errors.
func NewFileReader(r io.Reader, name string) (*FileReader, error) {
	fr := &FileReader{r: bufio.NewReaderSize(r, 64<<10), name: name, channel: -1}
	var h [fileHeaderLen]byte
	if n, err := io.ReadFull(fr.r, h[:]); err != nil {
		return nil, fr.fail(int64(n), 0, badFile("%d bytes, an archive file's header has %d", n, fileHeaderLen))
	}
	if string(h[:4]) != fileMagic {
		return nil, fr.fail(0, 0, badFile("magic %q, want %q: not an archive file", h[:4], fileMagic))
	}
	if v := binary.BigEndian.Uint16(h[4:]); v != fileVersion {
		return nil, fr.fail(4, 0, badFile("version %d, this reader reads version %d", v, fileVersion))
	}
	n := int(binary.BigEndian.Uint16(h[6:]))
	feed := make([]byte, n)
	if got, err := io.ReadFull(fr.r, feed); err != nil {
		return nil, fr.fail(fileHeaderLen+int64(got), 0, badFile("the feed name is cut short: %d of %d bytes", got, n))
	}
	if n == 0 || n > 255 || !validFeed(string(feed)) {
		return nil, fr.fail(6, 0, badFile("feed name %q: want 1 to 255 letters, digits, '-' or '_'", feed))
	}
	fr.feed, fr.off = string(feed), int64(fileHeaderLen+n)
	return fr, nil
}

// Feed returns the name of the feed the file was exported from.
func (fr *FileReader) Feed() string { return fr.feed }

// Name returns the file's name, as errors give it.
func (fr *FileReader) Name() string { return fr.name }

// Offset returns the bytes of the file read so far.
func (fr *FileReader) Offset() int64 { return fr.off }

func (fr *FileReader) fail(off int64, seq uint64, err error) error {
	return &FileError{Name: fr.name, Offset: off, StreamSeq: seq, Err: err}
}

// Next returns the next entry; io.EOF at the clean end of the file. A
// record that fails Decode is returned as a *FileError matching
// ErrCorrupt, with the offset of the fault, and reading can go on past it.
// Any other error (matching ErrBadFile) ends the file: Next returns it
// again.
func (fr *FileReader) Next() (FileEntry, error) {
	for {
		e, skip, err := fr.next()
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				fr.err = err
			}
			return FileEntry{}, err
		}
		if !skip {
			return e, nil
		}
	}
}

// next reads one entry; skip says it is a record of a channel not read.
func (fr *FileReader) next() (e FileEntry, skip bool, err error) {
	if fr.err != nil {
		return e, false, fr.err
	}
	start := fr.off
	h := fr.hdr[:]
	n, err := io.ReadFull(fr.r, h)
	fr.off += int64(n)
	switch {
	case err == io.EOF:
		return e, false, io.EOF
	case err != nil:
		return e, false, fr.fail(start, 0, badFile("a frame header cut short: %d of %d bytes", n, frameHeaderLen))
	}
	kind, size, seq := h[0], binary.BigEndian.Uint32(h[4:]), binary.BigEndian.Uint64(h[8:])
	if size > MaxFileEntry {
		return e, false, fr.fail(start+4, seq, badFile("entry length %d, at most %d", size, MaxFileEntry))
	}
	badSum := func() error {
		return fr.fail(start+frameCRCOff, seq, badFile("frame checksum %08x does not match its bytes", binary.BigEndian.Uint32(h[frameCRCOff:])))
	}
	if kind != FileKeys && !fr.crcOK(nil) {
		return e, false, badSum()
	}
	if h[1] != 0 || h[2] != 0 || h[3] != 0 {
		return e, false, fr.fail(start+1, seq, badFile("reserved bytes % x, want 0", h[1:4]))
	}
	if kind != FileRecord && kind != FileKeys {
		return e, false, fr.fail(start, seq, badFile("entry kind %d, want %d (record) or %d (key record)", kind, FileRecord, FileKeys))
	}
	// A record of another channel is skipped unread: its channel is in
	// its header, and its own checksum is for its channel's reader.
	if kind == FileRecord && fr.channel >= 0 && size >= HeaderLen {
		if b, err := fr.r.Peek(8); err == nil && int(binary.BigEndian.Uint16(b[6:])) != fr.channel {
			d, err := fr.r.Discard(int(size))
			fr.off += int64(d)
			if err != nil {
				return e, false, fr.fail(start, seq, badFile("an entry of %d bytes cut short: %d bytes left", size, d))
			}
			return e, true, nil
		}
	}
	if cap(fr.buf) < int(size) {
		fr.buf = make([]byte, size)
	}
	body := fr.buf[:size]
	n, err = io.ReadFull(fr.r, body)
	fr.off += int64(n)
	if err != nil {
		return e, false, fr.fail(start, seq, badFile("an entry of %d bytes cut short: %d bytes left", size, n))
	}
	if kind == FileKeys && !fr.crcOK(body) {
		return e, false, badSum()
	}
	e = FileEntry{Kind: kind, Offset: start, StreamSeq: seq}
	switch kind {
	case FileRecord:
		rec, err := Decode(body)
		if err != nil {
			var de *DecodeError
			off := start + frameHeaderLen
			if errors.As(err, &de) {
				off += int64(de.Offset)
			}
			return e, false, fr.fail(off, seq, err)
		}
		if fr.channel >= 0 && rec.Channel != fr.channel {
			return e, true, nil
		}
		e.Record = rec
	case FileKeys:
		if err := json.Unmarshal(body, &e.Keys); err != nil {
			return e, false, fr.fail(start+frameHeaderLen, seq, badFile("key record: %v", err))
		}
		if _, _, err := e.Keys.schedule(); err != nil {
			return e, false, fr.fail(start+frameHeaderLen, seq, badFile("key record of channel %d session %q: %v", e.Keys.Channel, e.Keys.Session, err))
		}
	}
	return e, false, nil
}

// crcOK checks the frame header's checksum over the header and body (a
// key record's body; nil for any other entry).
func (fr *FileReader) crcOK(body []byte) bool {
	h := fr.hdr[:]
	c := crc32.Update(0, castagnoli, h[:frameCRCOff])
	c = crc32.Update(c, castagnoli, body)
	return c == binary.BigEndian.Uint32(h[frameCRCOff:])
}
