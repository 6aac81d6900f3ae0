package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// TLSFiles configures mutual TLS from PEM files. Every member's
// certificate is signed by the CA in CAFile and carries both the server
// and client extended key usages: each node is a server to its peers and a
// client of them. A connection is accepted only if the peer presents such a
// certificate; there is no TLS without client certificates.
//
// What mTLS does and does not give: a peer must hold a certificate of the
// cluster CA to be heard at all, but any holder may claim any node id in
// its handshake. Issue certificates to cluster members only.
type TLSFiles struct {
	CertFile string // this node's certificate (PEM), used as server and client
	KeyFile  string // its private key (PEM)
	CAFile   string // the CA bundle (PEM) that signs every member's certificate
	// ServerName, if set, is the name peers' certificates are verified
	// against instead of the host part of the address dialed.
	ServerName string
}

// tlsConfigs holds the server and client configurations loaded from
// TLSFiles. Certificates are read once, at NewTCP: restart to rotate.
type tlsConfigs struct {
	server *tls.Config
	client *tls.Config
	name   string
}

func loadTLS(f *TLSFiles) (*tlsConfigs, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, errors.New("transport: TLS needs CertFile, KeyFile and CAFile")
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("transport: TLS key pair %s, %s: %w", f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("transport: TLS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("transport: TLS CA file %s holds no PEM certificate", f.CAFile)
	}
	return &tlsConfigs{
		server: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS13,
		},
		client: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
			MinVersion:   tls.VersionTLS13,
		},
		name: f.ServerName,
	}, nil
}

// clientFor returns the client configuration for dialing addr.
func (c *tlsConfigs) clientFor(addr string) *tls.Config {
	cfg := c.client.Clone()
	cfg.ServerName = c.name
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	return cfg
}
