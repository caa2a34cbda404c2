package archive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/tickcast/tickcast/mold"
	"github.com/tickcast/tickcast/seal"
)

// recordSource is where a replay takes one channel's records from: the
// archive's stream (*Reader) or an archive file (*fileSource).
type recordSource interface {
	// Next returns the next record and its sequence in the stream; io.EOF
	// after the last. An error matching ErrCorrupt is a record skipped,
	// and reading goes on.
	Next() (Record, uint64, error)
	// stopWait ends a Next waiting for a record, from another goroutine.
	stopWait()
	// AtTail reports whether the last record Next returned was the last
	// one stored when it was read (a following Reader); false for a file.
	AtTail() bool
	// Close stops the source.
	Close()
}

var (
	_ recordSource = (*Reader)(nil)
	_ recordSource = (*fileSource)(nil)
)

// fileSource reads one channel's records from an archive file.
type fileSource struct {
	f    *os.File
	fr   *FileReader
	from time.Time
}

// openFileSource opens channel ch's records in the archive file path, from
// the first record holding a packet recorded at or after from (zero: the
// first), and returns the channel's keys from the file's key records. The
// whole file is read once first, so that a file damaged in its framing, a
// channel it does not hold and a from after its end are refused before
// the replay starts.
func openFileSource(path string, ch int, from time.Time) (*fileSource, map[mold.Session]*seal.Schedule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("archive: %w", err)
	}
	keys, err := scanFile(f, path, ch, from)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("archive: %w", err)
	}
	fr, err := NewFileReader(f, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	fr.channel = ch
	return &fileSource{f: f, fr: fr, from: from}, keys, nil
}

// scanFile reads the file's channel ch through, returning its keys.
func scanFile(f *os.File, path string, ch int, from time.Time) (map[mold.Session]*seal.Schedule, error) {
	fr, err := NewFileReader(f, path)
	if err != nil {
		return nil, err
	}
	fr.channel = ch
	keys := map[mold.Session]*seal.Schedule{}
	records, last := 0, int64(0)
	for {
		e, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrCorrupt) {
			continue // reported when the replay meets it
		}
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case FileKeys:
			if e.Keys.Channel == ch {
				sch, s, _ := e.Keys.schedule() // checked by Next
				keys[s] = sch
			}
		case FileRecord:
			records++
			last = max(last, e.Record.LastNs)
		}
	}
	if records == 0 {
		return nil, fmt.Errorf("%w: file %s holds no record of channel %d (it holds channels %v)", ErrEmpty, path, ch, fileChannels(f, path))
	}
	if !from.IsZero() && from.After(time.Unix(0, last)) {
		return nil, fmt.Errorf("%w: from %s: file %s holds records of channel %d up to %s", ErrOutOfRange, from.UTC().Format(time.RFC3339Nano),
			path, ch, time.Unix(0, last).UTC().Format(time.RFC3339Nano))
	}
	return keys, nil
}

// fileChannels lists the channels an archive file holds records of, for
// an error message.
func fileChannels(f *os.File, path string) []int {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	fr, err := NewFileReader(f, path)
	if err != nil {
		return nil
	}
	var chs []int
	for {
		e, err := fr.Next()
		if errors.Is(err, ErrCorrupt) {
			continue
		}
		if err != nil {
			break
		}
		if e.Kind == FileRecord && !slices.Contains(chs, e.Record.Channel) {
			chs = append(chs, e.Record.Channel)
		}
	}
	slices.Sort(chs)
	return chs
}

// Next returns the channel's next record in the file and its sequence in
// the stream it was exported from. A record that fails Decode is returned
// as a *FileError matching ErrCorrupt.
func (s *fileSource) Next() (Record, uint64, error) {
	for {
		e, err := s.fr.Next()
		if err != nil {
			var fe *FileError
			if errors.As(err, &fe) {
				return Record{}, fe.StreamSeq, err
			}
			return Record{}, 0, err
		}
		if e.Kind != FileRecord {
			continue
		}
		// A file keeps no stored time: a record is in range when it
		// holds a packet recorded at or after from.
		if !s.from.IsZero() && time.Unix(0, e.Record.LastNs).Before(s.from) {
			continue
		}
		return e.Record, e.StreamSeq, nil
	}
}

// stopWait does nothing: reading a file never waits for a record.
func (s *fileSource) stopWait() {}

// AtTail is false: a file does not grow.
func (s *fileSource) AtTail() bool { return false }

// Close closes the file.
func (s *fileSource) Close() { s.f.Close() }
