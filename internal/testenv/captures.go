package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// CaptureDir returns the directory of the real NASDAQ ITCH 5.0 captures,
// ../shared/testdata/itch-pcap beside the module root (its README says
// where they come from; they are read in place, never copied into the
// project), or an error saying why it is not there.
func CaptureDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", "testdata", "itch-pcap")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// RealCapture returns the path of the real capture name in CaptureDir.
// Without it the test skips, or fails where TICKCAST_REQUIRE names
// itch-pcap.
func RealCapture(t testing.TB, name string) string {
	t.Helper()
	dir, err := CaptureDir()
	p := filepath.Join(dir, name)
	if err == nil {
		_, err = os.Stat(p)
	}
	Need(t, "itch-pcap", err == nil, "the real capture "+name+" is not at ../shared/testdata/itch-pcap beside the module")
	return p
}
