package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
	"github.com/edictlog/edictlog/wire/wiretest"
)

// testCA is a certificate authority made for one test; nothing is checked
// in.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
	dir  string
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	dir := t.TempDir()
	file := filepath.Join(dir, name+"-ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file, dir: dir}
}

// issue returns TLSFiles for a member certificate valid for 127.0.0.1.
func (ca *testCA) issue(t testing.TB, name string) *TLSFiles {
	t.Helper()
	return ca.issueNaming(t, name)
}

// issueNaming is issue for a certificate that names node ids (NodeURN).
func (ca *testCA) issueNaming(t testing.TB, name string, ids ...edict.ProcessID) *TLSFiles {
	t.Helper()
	var uris []*url.URL
	for _, id := range ids {
		u, err := url.Parse(NodeURN(id))
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, u)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		URIs:         uris,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), CAFile: ca.file}
	writePEM(t, f.CertFile, "CERTIFICATE", der)
	writePEM(t, f.KeyFile, "EC PRIVATE KEY", kder)
	return f
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newTLSNode(t *testing.T, id edict.ProcessID, files *TLSFiles) *tcpNode {
	t.Helper()
	lb := &logBuffer{}
	tr, err := NewTCP(TCPConfig{ID: id, ClusterID: "test", BindAddr: "127.0.0.1:0", TLS: files, Logger: lb.logger(), HandshakeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &tcpNode{TCP: tr, log: lb}
}

func TestTCPMutualTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "cluster")
	a := newTLSNode(t, 1, ca.issue(t, "a"))
	b := newTLSNode(t, 2, ca.issue(t, "b"))
	a.AddPeer(2, b.LocalAddr())
	b.AddPeer(1, a.LocalAddr())
	if err := a.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(1, 2))); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, b, 5*time.Second); m.From != 1 {
		t.Fatalf("got %v", m)
	}
	if err := b.Send(ctxT(t, time.Second), 1, wire.Message{Append: wiretest.Append(0, 4, 100)}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, a, 5*time.Second); m.Append == nil {
		t.Fatalf("got %v", m)
	}

	t.Run("client certificate from another CA", func(t *testing.T) {
		t.Parallel()
		other := newTestCA(t, "other")
		files := other.issue(t, "intruder")
		files.CAFile = ca.file // it trusts our servers, but its own certificate is foreign
		intruder := newTLSNode(t, 3, files)
		intruder.AddPeer(2, b.LocalAddr())
		for range 3 {
			intruder.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(3, 2)))
			time.Sleep(60 * time.Millisecond)
		}
		// Go's client sends no certificate the server's CA list does not
		// cover, so the server sees none.
		t.Log(intruder.log.waitLog(t, "cannot connect to peer", "peer=p2", "certificate required"))
		expectNothingFrom(t, b, 3, 300*time.Millisecond)
	})
	t.Run("foreign client certificate presented", func(t *testing.T) {
		t.Parallel()
		files := newTestCA(t, "foreign").issue(t, "intruder")
		cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		c, err := tls.Dial("tcp", b.LocalAddr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h, _ := encodeFrame("hello", &hello{Cluster: "test", From: 6, To: 2, Lane: uint8(laneControl)}, maxHandshakeFrame)
		m, _ := encodeMessageFrame(wire.LeaseMessage(wiretest.Lease(6, 2)), DefaultMaxFrameSize)
		c.Write(append(h, m...))
		expectClosed(t, c)
		t.Log(b.log.waitLog(t, "refusing connection", "TLS handshake failed", "certificate signed by unknown authority"))
		expectNothingFrom(t, b, 6, 300*time.Millisecond)
	})
	t.Run("no client certificate", func(t *testing.T) {
		t.Parallel()
		pool := x509.NewCertPool()
		pool.AddCert(ca.cert)
		// A TLS 1.3 client finishes its side of the handshake before the
		// server checks its certificate, so it can write a hello and a
		// message at once; none of it may be accepted.
		c, err := tls.Dial("tcp", b.LocalAddr(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h, _ := encodeFrame("hello", &hello{Cluster: "test", From: 4, To: 2, Lane: uint8(laneControl)}, maxHandshakeFrame)
		m, _ := encodeMessageFrame(wire.LeaseMessage(wiretest.Lease(4, 2)), DefaultMaxFrameSize)
		c.Write(append(h, m...))
		expectClosed(t, c)
		t.Log(b.log.waitLog(t, "refusing connection", "TLS handshake failed", "client didn't provide a certificate"))
		expectNothingFrom(t, b, 4, 300*time.Millisecond)
	})
	t.Run("plain TCP", func(t *testing.T) {
		t.Parallel()
		plain := newTCPNodes(t, 1, func(c *TCPConfig) { c.ID = 5 })[0]
		plain.AddPeer(2, b.LocalAddr())
		plain.Send(ctxT(t, time.Second), 2, wire.LeaseMessage(wiretest.Lease(5, 2)))
		b.log.waitLog(t, "refusing connection", "TLS handshake failed")
		plain.log.waitLog(t, "cannot connect to peer", "peer=p2")
		expectNothingFrom(t, b, 5, 300*time.Millisecond)
	})
}

// expectNothingFrom fails if tr receives a message from the given sender
// (other subtests share tr, so messages from others are let through).
func expectNothingFrom(t *testing.T, tr receiver, from edict.ProcessID, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m := <-tr.Receive():
			if m.From == from {
				t.Fatalf("accepted %v", m)
			}
		case <-deadline:
			return
		}
	}
}
