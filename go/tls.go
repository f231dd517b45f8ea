package gentrace

// tls.go: TLS and mTLS to gentraced (docs/GO.md, "TLS"), with crypto/tls.
//
// The same three variables as the C agent: GENTRACE_TLS_CA (the CA the
// daemon's certificate must chain to; setting it turns TLS on),
// GENTRACE_TLS_CERT and GENTRACE_TLS_KEY (this program's certificate for a
// daemon started with --tls-client-ca). The files are read once, by Start,
// which fails if they do not load. The sender goroutine dials, then runs
// the handshake bounded by the handshake timeout; a failure is counted
// (Stats.TLSFailures), never surfaced to the program, and retried with the
// usual backoff while the spool keeps the generations.
//
// Invariants:
//  1. The daemon is verified against the CA and the host dialled (IP or
//     DNS subjectAltName), never skipped, otherwise anyone on the path
//     could collect the trace.
//  2. A TLS failure that shows only after the client's handshake ended (a
//     TLS 1.3 daemon refusing our certificate answers with an alert at
//     the first read) counts as a TLS failure like a failed handshake, so
//     an operator sees one cause in Stats whatever the TLS version.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// tlsSetup resolves the TLS part of c (fields over variables) and loads
// the files: nil with no TLS asked for.
func tlsSetup(c Config) (*tls.Config, error) {
	ca, cert, key := c.TLSCA, c.TLSCert, c.TLSKey
	if ca == "" {
		ca = os.Getenv("GENTRACE_TLS_CA")
	}
	if cert == "" {
		cert = os.Getenv("GENTRACE_TLS_CERT")
	}
	if key == "" {
		key = os.Getenv("GENTRACE_TLS_KEY")
	}
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("gentrace: GENTRACE_TLS_CERT and GENTRACE_TLS_KEY go together")
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS12, // as gentraced: TLS 1.3, 1.2 allowed
		// Full 16 KiB records from the first byte: the client streams
		// bulk, never latency-bound small replies.
		DynamicRecordSizingDisabled: true,
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("gentrace: GENTRACE_TLS_CA: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gentrace: GENTRACE_TLS_CA %s: no PEM certificate in it", ca)
		}
	} // else: the system's roots (RootCAs nil)
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("gentrace: GENTRACE_TLS_CERT/GENTRACE_TLS_KEY: %v", err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

// tlsClient wraps a dialled connection to addr and runs the handshake
// within ctx (invariant 1: ServerName is the host dialled).
func tlsClient(ctx context.Context, base *tls.Config, raw net.Conn, addr string) (*tls.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := base.Clone()
	cfg.ServerName = host
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// isTLSAlert says whether err is the daemon's TLS alert (invariant 2).
func isTLSAlert(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}

// isTLS says whether conn carries TLS: writes then go through the buffered
// writer, so a frame header and its chunk share full records.
func isTLS(conn io.Writer) bool {
	_, ok := conn.(*tls.Conn)
	return ok
}

func (c *client) countTLSFailure() {
	c.mu.Lock()
	c.tlsFails++
	c.mu.Unlock()
}
