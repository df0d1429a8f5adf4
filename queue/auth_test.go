package queue

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// authServer runs a plain loopback server (no JetStream) with the given
// options, for the connection's authentication paths.
func authServer(t *testing.T, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testTimeout) {
		t.Fatal("auth server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

func mustConnect(t *testing.T, cfg ConnConfig) {
	t.Helper()
	c, err := Connect(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c.Close()
}

func mustNotConnect(t *testing.T, cfg ConnConfig) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if c, err := Connect(ctx, cfg); err == nil {
		c.Close()
		t.Fatal("connected with wrong credentials")
	}
}

func TestConnectTokenAndUserPassword(t *testing.T) {
	url := authServer(t, &server.Options{Authorization: "s3cret"})
	mustConnect(t, ConnConfig{URL: url, Token: "s3cret"})
	mustNotConnect(t, ConnConfig{URL: url, Token: "wrong"})

	url = authServer(t, &server.Options{Username: "rec", Password: "pw"})
	mustConnect(t, ConnConfig{URL: url, User: "rec", Password: "pw"})
	mustNotConnect(t, ConnConfig{URL: url, User: "rec", Password: "nope"})
}

func TestConnectNKeySeedFile(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	path := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	url := authServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	mustConnect(t, ConnConfig{URL: url, NKeySeedFile: path})
	mustNotConnect(t, ConnConfig{URL: url})
}

func TestConnectMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test ca", true)
	srvCert, srvKey := newCert(t, ca, caKey, "server", false)
	cliCert, cliKey := newCert(t, ca, caKey, "client", false)
	write := func(name string, blockType string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", "CERTIFICATE", ca.Raw)
	certFile := write("client.pem", "CERTIFICATE", cliCert.Raw)
	keyDER, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := write("client-key.pem", "EC PRIVATE KEY", keyDER)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	url := authServer(t, &server.Options{
		TLS:       true,
		TLSVerify: true,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		},
		TLSTimeout: 5,
	})
	mustConnect(t, ConnConfig{URL: url, TLS: TLSConfig{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}})
	mustNotConnect(t, ConnConfig{URL: url, TLS: TLSConfig{CAFile: caFile}})
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA:                  isCA,
		BasicConstraintsValid: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
