package natsconn

// Flags are the NATS client credentials and TLS settings both programs
// take; embed it in a program's settings struct (internal/cliconf reads the
// tags). The server URL is each program's own setting, because their
// defaults differ.
type Flags struct {
	User     string `flag:"nats-user" help:"NATS user name (with --nats-password)"`
	Password string `flag:"nats-password" help:"NATS password"`
	Token    string `flag:"nats-token" help:"NATS authentication token"`
	NKey     string `flag:"nats-nkey" help:"file holding a NATS NKey seed"`
	Creds    string `flag:"nats-creds" help:"NATS credentials (.creds) file"`
	TLSCA    string `flag:"nats-tls-ca" help:"CA certificate (PEM) that signs the NATS server's certificate"`
	TLSCert  string `flag:"nats-tls-cert" help:"client certificate (PEM) for NATS servers that require one"`
	TLSKey   string `flag:"nats-tls-key" help:"private key (PEM) of --nats-tls-cert"`
}

// ConnConfig returns the connection settings for url, with the client name
// and inbox prefix given (a subscriber user's replies come to its own inbox
// prefix, see UserInboxPrefix).
func (f Flags) ConnConfig(url, name, inboxPrefix string) ConnConfig {
	return ConnConfig{
		URL: url, Name: name, User: f.User, Password: f.Password, Token: f.Token,
		NKeySeedFile: f.NKey, CredsFile: f.Creds, TLSCA: f.TLSCA, TLSCert: f.TLSCert, TLSKey: f.TLSKey,
		InboxPrefix: inboxPrefix,
	}
}

// InboxPrefix returns the inbox prefix a client connecting as f.User uses,
// UserInboxPrefix(f.User), or "" when no user name is set (token, NKey or
// credentials-file clients, or none).
func (f Flags) InboxPrefix() string {
	if f.User == "" {
		return ""
	}
	return UserInboxPrefix(f.User)
}
