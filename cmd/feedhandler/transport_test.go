//go:build !rdma

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRDMANotBuilt: without -tags rdma, --transport rdma is refused with the
// build tag and packages it needs (exit 2), and an unknown transport names
// the setting.
func TestRDMANotBuilt(t *testing.T) {
	for args, want := range map[string]string{
		"--transport rdma": "-tags rdma",
		"--transport ipx":  `transport: "ipx"`,
	} {
		var out, errb bytes.Buffer
		if code := run(strings.Fields(args), func(string) string { return "" }, &out, &errb); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 mentioning %q", args, code, errb.String(), want)
		}
	}
}
