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
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/reconciled/reconciled/internal/testutil"
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

// tokenServer runs a plain loopback server taking one token on a fixed
// port (0: a free one); restarting it there with another token is how a
// token is rotated on the server.
func tokenServer(t *testing.T, port int, token string) (*server.Server, int) {
	t.Helper()
	if port == 0 {
		port = server.RANDOM_PORT
	}
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true, Authorization: token})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testTimeout) {
		t.Fatal("token server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s, s.Addr().(*net.TCPAddr).Port
}

// The server's token changes under a connected client and changes back:
// the client keeps trying through the authorization violations (nats.go
// alone gives up for good after the second one) and is connected again
// once the server takes its token; a token rotated in the token file is
// read at the next attempt.
func TestReconnectsThroughAuthorizationErrors(t *testing.T) {
	s, port := tokenServer(t, 0, "first")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	c, err := Connect(testCtx(t), ConnConfig{URL: s.ClientURL(), TokenFile: tokenFile, RetryAuthErrors: true, Logger: zap.New(core),
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	violations := func(atLeast int) {
		t.Helper()
		testutil.Eventually(t, testTimeout, fmt.Sprintf("%d authorization violations", atLeast), func() (bool, string) {
			n := logs.FilterMessage("nats async error").Len()
			return n >= atLeast || c.NATS().IsClosed(), fmt.Sprintf("%d seen", n)
		})
		if c.NATS().IsClosed() {
			t.Fatalf("connection closed for good after authorization violations: %v", c.Err())
		}
	}
	restart := func(token string) {
		t.Helper()
		s.Shutdown()
		s.WaitForShutdown()
		s, _ = tokenServer(t, port, token)
	}
	connected := func(what string) {
		t.Helper()
		testutil.Eventually(t, testTimeout, what, func() (bool, string) {
			return c.NATS().IsConnected(), fmt.Sprintf("status %v, closed %t, last error %v", c.NATS().Status(), c.NATS().IsClosed(), c.NATS().LastError())
		})
	}

	restart("second")
	violations(3)
	restart("first")
	connected("reconnect once the server takes the token again")

	restart("second")
	violations(logs.FilterMessage("nats async error").Len() + 3)
	if err := os.WriteFile(tokenFile, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	connected("reconnect with the token rotated in the file")
	if c.Err() != nil {
		t.Fatalf("Err %v on an open connection", c.Err())
	}
}

// Without RetryAuthErrors (a command line tool) the client gives up on
// repeated authorization violations; the connection then says it closed
// for good, and why.
func TestConnClosedForGoodSaysWhy(t *testing.T) {
	s, port := tokenServer(t, 0, "first")
	c, err := Connect(testCtx(t), ConnConfig{URL: s.ClientURL(), Token: "first",
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s.Shutdown()
	s.WaitForShutdown()
	tokenServer(t, port, "second")
	recv(t, c.Closed(), "the connection closed for good")
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "closed for good") || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("Err %v", err)
	}

	c2 := connect(t, startServer(t, t.TempDir()))
	c2.Close()
	if err := c2.Err(); err != nil {
		t.Fatalf("Err %v after Close", err)
	}
}

func TestTokenFileRefusedWhenUnreadable(t *testing.T) {
	_, err := (ConnConfig{URL: "nats://127.0.0.1:1", TokenFile: filepath.Join(t.TempDir(), "missing")}).options()
	if err == nil {
		t.Fatal("a missing token file accepted")
	}
	if _, err := (ConnConfig{URL: "nats://127.0.0.1:1", Token: "t", TokenFile: "f"}).options(); err == nil {
		t.Fatal("token and token file both accepted")
	}
}

// A process started with credentials the server refuses fails its start,
// naming the refusal, with RetryAuthErrors too (that is for a connection
// that was up); a server not there yet is waited for, and the wait says so.
func TestConnectRefusedCredentialsFailTheStart(t *testing.T) {
	s, _ := tokenServer(t, 0, "first")
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, err := Connect(ctx, ConnConfig{URL: s.ClientURL(), Token: "wrong", RetryAuthErrors: true,
		ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
	if err == nil || ctx.Err() != nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("Connect with a refused token: %v (context %v)", err, ctx.Err())
	}

	defer func(d time.Duration) { connectWarnEvery = d }(connectWarnEvery)
	connectWarnEvery = 20 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: connection refused
	core, logs := observer.New(zap.WarnLevel)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Connect(wctx, ConnConfig{URL: "nats://" + addr, RetryAuthErrors: true, Logger: zap.New(core),
			ReconnectMin: 5 * time.Millisecond, ReconnectMax: 20 * time.Millisecond})
		errc <- err
	}()
	testutil.Eventually(t, testTimeout, "a warning that it still tries", func() (bool, string) {
		return logs.FilterMessageSnippet("still trying").Len() > 0, fmt.Sprint(logs.All())
	})
	wcancel()
	if err := recv(t, errc, "Connect's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect after its context ended: %v", err)
	}
}
