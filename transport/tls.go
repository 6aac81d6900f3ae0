package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/edictlog/edictlog/edict"
)

// TLSFiles configures mutual TLS from PEM files. Every member's
// certificate is signed by the CA in CAFile and carries both the server
// and client extended key usages: each node is a server to its peers and a
// client of them. A connection is accepted only if the peer presents such a
// certificate; there is no TLS without client certificates.
//
// What mTLS does and does not give: a peer must hold a certificate of the
// cluster CA to be heard at all. A certificate that names node ids binds
// its holder to them: a URI SAN of the form "urn:edictlog:node:<id>"
// (decimal, e.g. urn:edictlog:node:3) names one, and a certificate may
// name several. A peer whose certificate names ids may claim only those
// in its handshake, in either direction (the dialer's own id, the id the
// dialer meant to reach), and only a peer whose certificate names the id
// it claims is believed about where it listens (TCP.WatchAddresses): a
// restarted member's new address is learned from its connections only
// then. A certificate that names no id lets its holder claim any id, and
// its announcements of addresses are ignored. Issue certificates to
// cluster members only, each naming its member's id.
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

// nodeURNPrefix starts a URI SAN that names a node id (TLSFiles).
const nodeURNPrefix = "urn:edictlog:node:"

// NodeURN is the URI SAN a member's certificate carries to name its node
// id, for certificate tooling: "urn:edictlog:node:<id>".
func NodeURN(id edict.ProcessID) string { return nodeURNPrefix + strconv.FormatUint(uint64(id), 10) }

// certNodeIDs returns the node ids cert names (TLSFiles), sorted. A URI of
// the prefix whose rest is not a non-zero decimal id names none: a
// malformed name binds its holder to nothing rather than to a guess.
func certNodeIDs(cert *x509.Certificate) []edict.ProcessID {
	var ids []edict.ProcessID
	for _, u := range cert.URIs {
		rest, ok := strings.CutPrefix(u.String(), nodeURNPrefix)
		if !ok {
			continue
		}
		if id, err := strconv.ParseUint(rest, 10, 64); err == nil && id != 0 {
			ids = append(ids, edict.ProcessID(id))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// peerIdentity is what a TLS connection's peer certificate says of the
// node ids its holder may claim: all (no TLS, or a certificate that names
// none) or ids.
type peerIdentity struct {
	tls bool
	ids []edict.ProcessID
}

func identityOf(c net.Conn) peerIdentity {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return peerIdentity{}
	}
	id := peerIdentity{tls: true}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		id.ids = certNodeIDs(certs[0])
	}
	return id
}

// mayClaim reports whether the peer may speak as node p.
func (pi peerIdentity) mayClaim(p edict.ProcessID) bool {
	return len(pi.ids) == 0 || slices.Contains(pi.ids, p)
}

// proves reports whether the peer is believed to be node p about where
// it listens: without TLS, the network is trusted; with it, the
// certificate must name p.
func (pi peerIdentity) proves(p edict.ProcessID) bool {
	return !pi.tls || slices.Contains(pi.ids, p)
}
