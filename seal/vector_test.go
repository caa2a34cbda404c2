package seal

import (
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tickcast/tickcast/mold"
)

// TestDocVector checks the seal vector of docs/wire-format.md: the key
// derived from its secret, the packet sealed with its nonce, and the
// sealed packet opened back.
func TestDocVector(t *testing.T) {
	b, err := os.ReadFile("../docs/wire-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```seal-vector\n")
	if !ok {
		t.Fatal("docs/wire-format.md has no seal-vector block")
	}
	block, _, _ := strings.Cut(rest, "```")
	f := map[string]string{}
	key := ""
	for _, l := range strings.Split(block, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
			key = k
			f[k] = strings.TrimSpace(v)
		} else if key != "" {
			f[key] += strings.TrimSpace(l)
		}
	}
	hexOf := func(k string) []byte {
		v, err := hex.DecodeString(strings.ReplaceAll(f[k], " ", ""))
		if err != nil || len(v) == 0 {
			t.Fatalf("field %s %q: %v", k, f[k], err)
		}
		return v
	}
	session, err := mold.ParseSession(f["session"])
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := strconv.Atoi(f["channel"])
	epoch, _ := strconv.ParseUint(f["epoch"], 10, 32)
	kb, err := DeriveKey(hexOf("secret"), session, ch, uint32(epoch))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kb, hexOf("key")) {
		t.Fatalf("derived key %x, the doc says %x", kb, hexOf("key"))
	}
	k, _ := NewKey(uint32(epoch), kb)
	sealed := k.sealNonce(hexOf("packet"), hexOf("nonce"))
	if !bytes.Equal(sealed, hexOf("sealed")) {
		t.Fatalf("sealed\n%x\nthe doc says\n%x", sealed, hexOf("sealed"))
	}
	var ks Keys
	ks.Set(session, []*Key{k})
	got, err := ks.Open(sealed)
	if err != nil || !bytes.Equal(got, hexOf("packet")) {
		t.Fatalf("the doc's sealed packet opens to %x, %v", got, err)
	}
}
