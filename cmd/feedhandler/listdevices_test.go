package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestListDevices: --list-devices exits 0 on any host, naming the sysfs
// directory it read and where --iface leads, and stops there. With other
// settings that would be refused (here --channels 0) it still lists. The
// lines for a real device are checked on rxe0 in the Soft-RoCE VM
// (test/softroce, @listdevices).
func TestListDevices(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"--list-devices", "--iface", "127.0.0.1", "--channels", "0"}, func(string) string { return "" }, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	if !strings.Contains(s, "no RDMA devices found in /sys/class/infiniband") && !strings.Contains(s, "RDMA device(s) in /sys/class/infiniband:") {
		t.Errorf("output names neither the devices nor their absence:\n%s", s)
	}
	if !strings.Contains(s, "--iface: interface 127.0.0.1 (lo): no RDMA device for this interface") {
		t.Errorf("output does not say that --iface 127.0.0.1 (loopback) has no RDMA device:\n%s", s)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
	out.Reset()
	if code := run([]string{"--help"}, func(string) string { return "" }, &out, &errb); code != 0 || !strings.Contains(out.String(), "--list-devices") {
		t.Errorf("--help (exit %d) does not describe --list-devices", code)
	}
}
