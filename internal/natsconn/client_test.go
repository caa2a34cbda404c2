package natsconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"github.com/tickcast/tickcast/internal/testenv"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()

	s := startServer(t, ServerConfig{Users: []User{
		{Name: "fh", Password: "fh-secret", Role: RoleFeedHandler},
		{Name: "carol", NKey: pub, Role: RoleSubscriber},
	}})
	fh, _ := connectAs(t, s, "fh", "fh-secret")
	respond(t, fh, "tickcast.tickcast.snapshot.>", 1)
	carol, crec := connect(t, ConnConfig{URL: s.ClientURL(), NKeySeedFile: writeFile(t, "carol.nk", seed), InboxPrefix: UserInboxPrefix("carol")})
	request(t, carol, "tickcast.tickcast.snapshot.3", "nk", 1)
	// The subscriber role applies to the nkey user too.
	if err := carol.Publish("tickcast.tickcast.live.3", nil); err != nil {
		t.Fatal(err)
	}
	crec.waitFor(EventError, isPermViolation)

	nc, err := Connect(ConnConfig{URL: s.ClientURL(), NKeySeedFile: writeFile(t, "other.nk", otherSeed)}, nil)
	if err == nil {
		nc.Close()
		t.Fatal("unknown nkey connected")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("error %v is not nats.ErrAuthorization", err)
	}
	if _, err := Connect(ConnConfig{URL: s.ClientURL(), NKeySeedFile: writeFile(t, "bad.nk", []byte("not a seed"))}, nil); err == nil || !strings.Contains(err.Error(), "NKeySeedFile") {
		t.Errorf("bad seed file: %v", err)
	}
}

// TestCredsFile runs a server in operator mode (the kind of external server
// that issues credentials files) and connects with a generated one.
func TestCredsFile(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	oc, err = jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ajwt, err := jwt.NewAccountClaims(apub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	useed, _ := ukp.Seed()
	uc := jwt.NewUserClaims(upub)
	uc.IssuerAccount = apub
	ujwt, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(ujwt, useed)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(apub, ajwt); err != nil {
		t.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(wait) {
		t.Fatal("operator-mode server not ready")
	}
	nc, _ := connect(t, ConnConfig{URL: srv.ClientURL(), CredsFile: writeFile(t, "u.creds", creds)})
	sub := subscribeSync(t, nc, "tickcast.tickcast.live.0")
	if err := nc.Publish("tickcast.tickcast.live.0", []byte("jwt")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, sub, "jwt")
	// A user the account did not sign is refused.
	stranger, _ := nkeys.CreateUser()
	spub, _ := stranger.PublicKey()
	sseed, _ := stranger.Seed()
	sc := jwt.NewUserClaims(spub)
	sjwt, _ := sc.Encode(stranger)
	bad, _ := jwt.FormatUserConfig(sjwt, sseed)
	if nc, err := Connect(ConnConfig{URL: srv.ClientURL(), CredsFile: writeFile(t, "bad.creds", bad)}, nil); err == nil {
		nc.Close()
		t.Fatal("self-signed credentials connected")
	}
}

// pki is a throwaway CA with a server and a client certificate.
type pki struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tickcast test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := pki{caFile: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return p
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, ServerConfig{TLS: &TLSFiles{Cert: p.serverCert, Key: p.serverKey}})
	if !strings.HasPrefix(s.ClientURL(), "tls://127.0.0.1:") {
		t.Fatalf("ClientURL = %q", s.ClientURL())
	}
	nc, _ := connect(t, ConnConfig{URL: s.ClientURL(), TLSCA: p.caFile})
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
	sub := subscribeSync(t, nc, "x")
	if err := nc.Publish("x", []byte("secure")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, sub, "secure")

	// Without the CA the server's certificate is not trusted, whatever
	// the URL's scheme; that fails at once rather than retrying.
	for _, u := range []string{s.ClientURL(), strings.Replace(s.ClientURL(), "tls://", "nats://", 1)} {
		start := time.Now()
		nc, err := Connect(ConnConfig{URL: u}, nil)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connected without the CA", u)
		}
		var uae x509.UnknownAuthorityError
		if !errors.As(err, &uae) {
			t.Errorf("%s: error %v is not an unknown-authority error", u, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("took %v to fail", d)
		}
	}
	// A CA file that does not exist is a configuration error.
	if _, err := Connect(ConnConfig{URL: s.ClientURL(), TLSCA: "/nonexistent/ca.pem"}, nil); err == nil || !strings.Contains(err.Error(), "ConnConfig.TLSCA") {
		t.Errorf("missing CA file: %v", err)
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, ServerConfig{TLS: &TLSFiles{Cert: p.serverCert, Key: p.serverKey, CA: p.caFile}})
	connect(t, ConnConfig{URL: s.ClientURL(), TLSCA: p.caFile, TLSCert: p.clientCert, TLSKey: p.clientKey})
	nc, err := Connect(ConnConfig{URL: s.ClientURL(), TLSCA: p.caFile}, nil)
	if err == nil {
		nc.Close()
		t.Fatal("connected without a client certificate")
	}
	t.Logf("without client certificate: %v", err)
}

func TestReconnect(t *testing.T) {
	s := startServer(t, ServerConfig{})
	port := portOf(t, s)
	nc, rec := connect(t, ConnConfig{URL: s.ClientURL(), ReconnectWait: 50 * time.Millisecond})
	sub := subscribeSync(t, nc, "tickcast.tickcast.live.0")
	rec.waitFor(EventConnected, nil)

	s.Shutdown()
	rec.waitFor(EventDisconnected, nil)
	if nc.IsConnected() {
		t.Fatal("still connected after shutdown")
	}
	s2 := startServer(t, ServerConfig{Port: port})
	rec.waitFor(EventReconnected, nil)
	if got := nc.ConnectedUrl(); got != s2.ClientURL() {
		t.Errorf("reconnected to %q, want %q", got, s2.ClientURL())
	}
	// The subscription was restored on the new server.
	if err := nc.Publish("tickcast.tickcast.live.0", []byte("again")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, sub, "again")
}

func TestRetryOnFailedConnect(t *testing.T) {
	port := testenv.FreePorts(t, 1)[0]
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	nc, rec := connect(t, ConnConfig{URL: url, ReconnectWait: 50 * time.Millisecond})
	if nc.IsConnected() {
		t.Fatal("connected with no server")
	}
	if st := nc.Status(); st != nats.RECONNECTING {
		t.Errorf("status %v, want RECONNECTING", st)
	}
	rec.waitFor(EventWaiting, nil)
	// What is published meanwhile is buffered and delivered.
	sub, err := nc.SubscribeSync("tickcast.tickcast.live.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("tickcast.tickcast.live.1", []byte("early")); err != nil {
		t.Fatal(err)
	}
	startServer(t, ServerConfig{Port: port})
	rec.waitFor(EventConnected, nil)
	expectMsg(t, sub, "early")
	if err := nc.Publish("tickcast.tickcast.live.1", []byte("late")); err != nil {
		t.Fatal(err)
	}
	expectMsg(t, sub, "late")
	// Closed by the program while healthy: no error, though the first
	// attempts failed.
	nc.Close()
	if err := rec.waitFor(EventClosed, nil); err != nil || !Routine(EventClosed, err) {
		t.Errorf("closed with %v, want no error (a routine close)", err)
	}
}

func TestClosedEvent(t *testing.T) {
	s := startServer(t, ServerConfig{})
	nc, rec := connect(t, ConnConfig{URL: s.ClientURL()})
	nc.Close()
	rec.waitFor(EventClosed, nil)
}

func TestConnConfigValidation(t *testing.T) {
	file := writeFile(t, "f", []byte("x"))
	for _, tc := range []struct {
		name  string
		cfg   ConnConfig
		field string
	}{
		{"no url", ConnConfig{}, "ConnConfig.URL"},
		{"bad url", ConnConfig{URL: "nats://[::1"}, "ConnConfig.URL"},
		{"user without password", ConnConfig{URL: "nats://127.0.0.1:1", User: "a"}, "ConnConfig.Password"},
		{"password without user", ConnConfig{URL: "nats://127.0.0.1:1", Password: "a"}, "ConnConfig.User"},
		{"user and token", ConnConfig{URL: "nats://127.0.0.1:1", User: "a", Password: "b", Token: "t"}, "ConnConfig.Token"},
		{"nkey and creds", ConnConfig{URL: "nats://127.0.0.1:1", NKeySeedFile: file, CredsFile: file}, "ConnConfig.CredsFile"},
		{"token and nkey", ConnConfig{URL: "nats://127.0.0.1:1", Token: "t", NKeySeedFile: file}, "ConnConfig.NKeySeedFile"},
		{"cert without key", ConnConfig{URL: "nats://127.0.0.1:1", TLSCert: file}, "ConnConfig.TLSKey"},
		{"key without cert", ConnConfig{URL: "nats://127.0.0.1:1", TLSKey: file}, "ConnConfig.TLSCert"},
		{"missing creds", ConnConfig{URL: "nats://127.0.0.1:1", CredsFile: "/nonexistent/x.creds"}, "ConnConfig.CredsFile"},
		{"missing seed", ConnConfig{URL: "nats://127.0.0.1:1", NKeySeedFile: "/nonexistent/x.nk"}, "ConnConfig.NKeySeedFile"},
		{"missing cert", ConnConfig{URL: "nats://127.0.0.1:1", TLSCert: "/nonexistent/c", TLSKey: file}, "ConnConfig.TLSCert"},
		{"bad ca", ConnConfig{URL: "nats://127.0.0.1:1", TLSCA: file}, "natsconn"},
		{"wildcard inbox", ConnConfig{URL: "nats://127.0.0.1:1", InboxPrefix: "_INBOX_*"}, "ConnConfig.InboxPrefix"},
		{"inbox ends with dot", ConnConfig{URL: "nats://127.0.0.1:1", InboxPrefix: "_INBOX_a."}, "ConnConfig.InboxPrefix"},
		{"negative wait", ConnConfig{URL: "nats://127.0.0.1:1", ReconnectWait: -time.Second}, "ConnConfig.ReconnectWait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := Connect(tc.cfg, nil)
			if err == nil {
				nc.Close()
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("nats://fh:secret@127.0.0.1:4222,nats://127.0.0.1:4223")
	if strings.Contains(got, "secret") {
		t.Errorf("redactURL kept the password: %s", got)
	}
}

// TestRoutine: the connection coming up and closing without an error are
// routine; a loss with an error, a failed reconnect and an asynchronous
// error are not.
func TestRoutine(t *testing.T) {
	lost := errors.New("EOF")
	for _, c := range []struct {
		event string
		err   error
		want  bool
	}{
		{EventConnected, nil, true},
		{EventReconnected, nil, true},
		{EventWaiting, lost, true},
		{EventDisconnected, nil, true},
		{EventClosed, nil, true},
		{EventDisconnected, lost, false},
		{EventClosed, lost, false},
		{EventReconnectFailed, lost, false},
		{EventError, lost, false},
	} {
		if got := Routine(c.event, c.err); got != c.want {
			t.Errorf("Routine(%q, %v) = %v, want %v", c.event, c.err, got, c.want)
		}
	}
}
