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

// TestDocVector checks the seal vectors of docs/wire-format.md, the
// authenticating one and the encrypting one: the key derived from its
// secret, the packet sealed with its nonce, and the sealed packet opened
// back.
func TestDocVector(t *testing.T) {
	t.Run("seal", func(t *testing.T) { checkVector(t, "seal-vector", DeriveKey, NewKey) })
	t.Run("encrypt", func(t *testing.T) { checkVector(t, "seal-vector-encrypted", DeriveEncryptingKey, NewEncryptingKey) })
}

func checkVector(t *testing.T, name string, derive func([]byte, mold.Session, int, uint32) ([]byte, error), newKey func(uint32, []byte) (*Key, error)) {
	b, err := os.ReadFile("../docs/wire-format.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```"+name+"\n")
	if !ok {
		t.Fatalf("docs/wire-format.md has no %s block", name)
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
	kb, err := derive(hexOf("secret"), session, ch, uint32(epoch))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kb, hexOf("key")) {
		t.Fatalf("derived key %x, the doc says %x", kb, hexOf("key"))
	}
	k, _ := newKey(uint32(epoch), kb)
	sealed := k.sealNonce(hexOf("packet"), hexOf("nonce"))
	if os.Getenv("TICKCAST_PRINT_VECTOR") != "" {
		t.Logf("%s: key %x sealed % x", name, kb, sealed)
	}
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
