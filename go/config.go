package gentrace

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Config says where and how to stream. Its zero value reads the same
// environment as the C agent (libgentrace); a field that is set wins over
// its variable.
type Config struct {
	// Addr is "host:port", or a comma-separated failover list tried in
	// order. Default: $GENTRACE_ADDR, else "127.0.0.1:7170".
	Addr string
	// Service names the program in gentraced. Default: $GENTRACE_SERVICE,
	// else the base name of os.Args[0].
	Service string
	// Host names the machine. Default: $GENTRACE_HOST, else os.Hostname().
	Host string
	// Token is the daemon's shared secret, if it has one. Default:
	// $GENTRACE_TOKEN.
	Token string
	// Tags are k=v labels of this session, added to $GENTRACE_TAGS
	// ("k=v,k=v"). The client adds format=go and go_version=1.NN itself.
	Tags map[string]string
	// SpoolBytes bounds the memory of generations waiting for the daemon
	// (and of the one being written). Default: $GENTRACE_SPOOL_MB MiB,
	// else 64 MiB. When it is full, whole Go generations are evicted or
	// dropped and counted; the traced program never waits. One generation
	// may use at most half of it.
	SpoolBytes int
	// FlushTimeout bounds how long Stop waits for the daemon to
	// acknowledge what is left. Default: $GENTRACE_FLUSH_MS ms, else 2 s.
	FlushTimeout time.Duration
	// FlightRecorder, when not nil, keeps only a recent window of the
	// trace in memory (runtime/trace.FlightRecorder, Go 1.25 and later)
	// and sends it when Snapshot is called, instead of streaming every
	// generation. With an older Go, Start returns ErrNoFlightRecorder.
	FlightRecorder *FlightRecorderConfig
	// Logf receives the client's rare diagnostics (connection lost,
	// daemon refusals). nil: the client writes nothing anywhere.
	Logf func(format string, args ...any)
	// TLSCA is the CA file (PEM) the daemon's certificate must chain to;
	// setting it turns TLS on (tls.go). Default: $GENTRACE_TLS_CA.
	TLSCA string
	// TLSCert and TLSKey are this program's certificate and key (PEM) for
	// a daemon that asks for client certificates (mTLS). Default:
	// $GENTRACE_TLS_CERT and $GENTRACE_TLS_KEY.
	TLSCert, TLSKey string
}

// FlightRecorderConfig mirrors runtime/trace.FlightRecorderConfig.
type FlightRecorderConfig struct {
	// MinAge is the age of the oldest events kept (0: the runtime's
	// default, a few seconds).
	MinAge time.Duration
	// MaxBytes bounds the window (0: the runtime's default).
	MaxBytes uint64
}

const (
	defaultAddr         = "127.0.0.1:7170"
	defaultSpoolBytes   = 64 << 20
	defaultFlushTimeout = 2 * time.Second
	// AgentVersion is sent in HELLO and stored with every generation.
	AgentVersion = "go-0.1.0"
)

type resolved struct {
	addrs        []string
	service      string
	host         string
	token        string
	tags         [][2]string // user tags, sorted, without format/go_version
	spoolBytes   int
	flushTimeout time.Duration
	logf         func(string, ...any)
	flight       *FlightRecorderConfig
	tls          *tls.Config // nil: plain TCP
}

func envInt(name string) (int, bool) {
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 31)
	if err != nil {
		return 0, false // like the C agent: a bad number is ignored
	}
	return int(n), true
}

// parseAddrs splits a failover list; every entry must be host:port.
func parseAddrs(s string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" || p == "" {
			return nil, fmt.Errorf("gentrace: bad address %q (want host:port)", a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errors.New("gentrace: no address")
	}
	return out, nil
}

func resolve(c Config) (*resolved, error) {
	r := &resolved{logf: c.Logf, flight: c.FlightRecorder}
	addr := c.Addr
	if addr == "" {
		addr = os.Getenv("GENTRACE_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	var err error
	if r.addrs, err = parseAddrs(addr); err != nil {
		return nil, err
	}
	r.service = c.Service
	if r.service == "" {
		r.service = os.Getenv("GENTRACE_SERVICE")
	}
	if r.service == "" && len(os.Args) > 0 {
		r.service = filepath.Base(os.Args[0])
	}
	r.host = c.Host
	if r.host == "" {
		r.host = os.Getenv("GENTRACE_HOST")
	}
	if r.host == "" {
		r.host, _ = os.Hostname()
	}
	r.token = c.Token
	if r.token == "" {
		r.token = os.Getenv("GENTRACE_TOKEN")
	}
	if len(r.service) > identStrMax || len(r.host) > identStrMax {
		return nil, errors.New("gentrace: service or host name over 1024 bytes")
	}
	if len(r.token) > tokenMax {
		return nil, errors.New("gentrace: token over 256 bytes")
	}
	tags := map[string]string{}
	if env := os.Getenv("GENTRACE_TAGS"); env != "" {
		for _, kv := range strings.Split(env, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("gentrace: GENTRACE_TAGS: bad entry %q (want k=v)", kv)
			}
			tags[k] = v
		}
	}
	for k, v := range c.Tags {
		if k == "" {
			return nil, errors.New("gentrace: empty tag key")
		}
		tags[k] = v
	}
	delete(tags, "format") // the client's own tags, below
	delete(tags, "go_version")
	for k, v := range tags {
		if len(k) > identStrMax || len(v) > identStrMax {
			return nil, fmt.Errorf("gentrace: tag %.40q over 1024 bytes", k)
		}
		r.tags = append(r.tags, [2]string{k, v})
	}
	if len(r.tags) > tagsMax-2 {
		return nil, fmt.Errorf("gentrace: %d tags, at most %d besides format and go_version", len(r.tags), tagsMax-2)
	}
	sort.Slice(r.tags, func(i, j int) bool { return r.tags[i][0] < r.tags[j][0] })
	if r.tls, err = tlsSetup(c); err != nil {
		return nil, err
	}
	r.spoolBytes = c.SpoolBytes
	if r.spoolBytes <= 0 {
		if mb, ok := envInt("GENTRACE_SPOOL_MB"); ok && mb > 0 {
			r.spoolBytes = mb << 20
		} else {
			r.spoolBytes = defaultSpoolBytes
		}
	}
	r.flushTimeout = c.FlushTimeout
	if r.flushTimeout <= 0 {
		if ms, ok := envInt("GENTRACE_FLUSH_MS"); ok && ms > 0 {
			r.flushTimeout = time.Duration(ms) * time.Millisecond
		} else {
			r.flushTimeout = defaultFlushTimeout
		}
	}
	return r, nil
}
