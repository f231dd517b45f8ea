package gentrace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad TLS files fail Start (resolve) with a message naming the variable;
// no TLS variable leaves the client on plain TCP.
func TestTLSSetup_badFilesAreAConfigurationError(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x.pem")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TLSCA: filepath.Join(dir, "missing.pem")}, "GENTRACE_TLS_CA"},
		{Config{TLSCA: notPEM}, "no PEM certificate"},
		{Config{TLSCert: notPEM}, "go together"},
		{Config{TLSCert: notPEM, TLSKey: notPEM}, "GENTRACE_TLS_CERT"},
	} {
		if _, err := resolve(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.cfg, err, c.want)
		}
	}
	t.Setenv("GENTRACE_TLS_CA", "")
	t.Setenv("GENTRACE_TLS_CERT", "")
	t.Setenv("GENTRACE_TLS_KEY", "")
	r, err := resolve(Config{})
	if err != nil || r.tls != nil {
		t.Fatalf("no TLS asked: %v %v", r, err)
	}
	t.Setenv("GENTRACE_TLS_CA", notPEM)
	if _, err := resolve(Config{}); err == nil {
		t.Fatal("GENTRACE_TLS_CA is not read")
	}
}
