package gotest

// The Go client over TLS and mTLS (go/tls.go) against gentraced with
// --tls-cert/--tls-key/--tls-client-ca: certificates are made here, per
// test, with crypto/x509 (none is committed).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"gentrace"
)

type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string // file
}

var serial int64 = 100

func writePEM(t *testing.T, path, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T, dir, name string) *ca {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial),
		Subject:   pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	p := filepath.Join(dir, name+".pem")
	writePEM(t, p, "CERTIFICATE", der, 0o644)
	return &ca{c, key, p}
}

// issue writes name.pem and name.key (mode 600) signed by a: a server
// certificate for 127.0.0.1, or a client one naming services as
// gentrace:service/NAME URIs.
func (a *ca) issue(t *testing.T, dir, name string, server bool, services ...string) (cert, key string) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial),
		Subject:   pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		for _, s := range services {
			tmpl.URIs = append(tmpl.URIs, &url.URL{Scheme: "gentrace", Opaque: "service/" + s})
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &k.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	writePEM(t, cert, "CERTIFICATE", der, 0o644)
	writePEM(t, key, "EC PRIVATE KEY", kd, 0o600)
	return cert, key
}

type tlsDaemon struct {
	*daemon
	ca   *ca
	dir  string
	http *http.Client
}

// startTLSDaemon: both ports over TLS, client certificates required on
// the agent port, each naming its services.
func startTLSDaemon(t *testing.T) *tlsDaemon {
	t.Helper()
	dir := t.TempDir()
	a := newCA(t, dir, "ca")
	cert, key := a.issue(t, dir, "gentraced", true)
	d := startDaemon(t, dir, "", "--tls-cert", cert, "--tls-key", key,
		"--tls-client-ca", a.pem, "--tls-require-service-san")
	pool := x509.NewCertPool()
	pool.AddCert(a.cert)
	hc := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return &tlsDaemon{d, a, dir, hc}
}

func (d *tlsDaemon) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := d.http.Get("https://" + d.web + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (d *tlsDaemon) metric(t *testing.T, name string) int64 {
	t.Helper()
	_, b := d.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^` + name + ` (\d+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// An agent whose certificate names service A streams over mTLS, the
// files given by the same variables as the C agent: every generation is
// acknowledged, and the window read back over HTTPS holds exactly the
// program's regions, tasks and logs.
func TestTLS_serviceCertificateStreamsEveryGenerationExactly(t *testing.T) {
	d := startTLSDaemon(t)
	cert, key := d.ca.issue(t, d.dir, "agent-a", false, "tls-a")
	t.Setenv("GENTRACE_TLS_CA", d.ca.pem)
	t.Setenv("GENTRACE_TLS_CERT", cert)
	t.Setenv("GENTRACE_TLS_KEY", key)
	const n = 20
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "tls-a"}); err != nil {
		t.Fatal(err)
	}
	handoff(n, 60*time.Millisecond) // about 1.2 s: more than one generation
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	st := gentrace.GetStats()
	if st.Generations == 0 || st.Stored != st.Generations || st.TLSFailures != 0 || st.AuthRefused != 0 {
		t.Fatalf("over mTLS: %+v", st)
	}
	resp, b := d.get(t, "/v1/trace?format=go&last=1h&session="+st.Session)
	mustEqual(t, "status", resp.StatusCode, 200)
	mustEqual(t, "generations header", resp.Header.Get("X-Gentrace-Generations"), strconv.FormatUint(st.Stored, 10))
	checkHandoff(t, readGo(t, b), n)
	if h := d.metric(t, "gentrace_tls_handshakes_total"); h < 1 {
		t.Fatalf("gentrace_tls_handshakes_total %d", h)
	}
}

// The same kind of certificate claiming another service: the daemon
// refuses the HELLO with AUTH, stores nothing, counts it; the client
// counts the refusal in its Stats (Config fields this time, not the
// environment) and the program never sees an error.
func TestTLS_certificateForAClaimingBStoresNothing(t *testing.T) {
	d := startTLSDaemon(t)
	cert, key := d.ca.issue(t, d.dir, "agent-a", false, "tls-a")
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "tls-b",
		TLSCA: d.ca.pem, TLSCert: cert, TLSKey: key,
		FlushTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	handoff(4, 100*time.Millisecond)
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	st := gentrace.GetStats()
	if st.Stored != 0 || st.AuthRefused == 0 || st.TLSFailures != 0 {
		t.Fatalf("claiming tls-b with a certificate for tls-a: %+v", st)
	}
	_, b := d.get(t, "/v1/agents")
	if regexp.MustCompile(`"service":"tls-b"`).Match(b) {
		t.Fatalf("tls-b listed: %s", b)
	}
	if r := d.metric(t, "gentrace_tls_service_refused_total"); r < 1 {
		t.Fatalf("gentrace_tls_service_refused_total %d", r)
	}
}

// TLS failures are counted, never returned, and nothing is stored: a
// daemon the client's CA did not sign, no client certificate for a daemon
// that requires one (TLS 1.3: the alert comes after the client's
// handshake), and a client certificate from another CA.
func TestTLS_untrustedEitherWayIsCountedAndStoresNothing(t *testing.T) {
	d := startTLSDaemon(t)
	rogue := newCA(t, d.dir, "rogue")
	rcert, rkey := rogue.issue(t, d.dir, "agent-rogue", false, "tls-a")
	cases := []struct {
		name string
		cfg  gentrace.Config
	}{
		{"daemon not signed by the client's CA", gentrace.Config{TLSCA: rogue.pem}},
		{"no client certificate", gentrace.Config{TLSCA: d.ca.pem}},
		{"client certificate from another CA", gentrace.Config{TLSCA: d.ca.pem, TLSCert: rcert, TLSKey: rkey}},
	}
	for _, c := range cases {
		cfg := c.cfg
		cfg.Addr, cfg.Service, cfg.FlushTimeout = d.agent, "tls-a", 300*time.Millisecond
		cfg.Logf = t.Logf
		if err := gentrace.Start(cfg); err != nil {
			t.Fatalf("%s: Start: %v", c.name, err)
		}
		handoff(2, 100*time.Millisecond)
		if err := gentrace.Stop(); err != nil {
			t.Fatalf("%s: Stop: %v", c.name, err)
		}
		st := gentrace.GetStats()
		if st.Stored != 0 || st.TLSFailures == 0 || st.Connected {
			t.Fatalf("%s: %+v", c.name, st)
		}
	}
	if f := d.metric(t, "gentrace_tls_failures_total"); f < 2 {
		t.Fatalf("gentrace_tls_failures_total %d, want the two refused client certificates at least", f)
	}
	_, b := d.get(t, "/v1/agents")
	if regexp.MustCompile(`"service":"tls-a"`).Match(b) {
		t.Fatalf("something was stored: %s", b)
	}
}
