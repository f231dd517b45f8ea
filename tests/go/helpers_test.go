// Package gotest runs the Go client against a real gentraced and reads
// what gentraced serves back with golang.org/x/exp/trace, a reader
// independent of both. Run by tests/go/run.sh (make check) with
// GENTRACED set to the built daemon and GENTRACE_CLI to the built CLI.
package gotest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

type daemon struct {
	cmd        *exec.Cmd
	dir        string
	agent, web string
	log        *bytes.Buffer
	exited     chan struct{} // closed once Wait returned
	logDone    chan struct{} // closed once its output was read to the end
}

func daemonPath(t *testing.T) string {
	p := os.Getenv("GENTRACED")
	if p == "" {
		t.Skip("GENTRACED is not set (make check sets it to the built gentraced)")
	}
	return p
}

// daemonPrefix runs gentraced under a command that execs it (same PID),
// e.g. taskset for the benchmark's pinned set-up; empty for the tests.
var daemonPrefix []string

var listenRe = regexp.MustCompile(`msg=listening agent=(\S+) http=(\S+)`)

// startDaemon starts gentraced on free ports (agentAddr "" = port 0) with
// its database in dir, and waits for its listening line.
func startDaemon(t *testing.T, dir, agentAddr string, extra ...string) *daemon {
	t.Helper()
	if agentAddr == "" {
		agentAddr = "127.0.0.1:0"
	}
	d := &daemon{dir: dir, log: &bytes.Buffer{}, exited: make(chan struct{}), logDone: make(chan struct{})}
	args := append([]string{"--agent-listen", agentAddr,
		"--http-listen", "127.0.0.1:0", "--db", filepath.Join(dir, "gentrace.db")}, extra...)
	argv := append(append([]string(nil), daemonPrefix...), daemonPath(t))
	d.cmd = exec.Command(argv[0], append(argv[1:], args...)...)
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		// A daemon built with sanitizers (CI's ASan build) reports there.
		<-d.logDone
		for _, bad := range []string{"AddressSanitizer", "LeakSanitizer", "runtime error:"} {
			if strings.Contains(d.log.String(), bad) {
				t.Errorf("gentraced reported %s:\n%s", bad, d.log)
			}
		}
	})
	found := make(chan []string, 1)
	go func() {
		defer close(d.logDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.log.WriteString(line + "\n")
			if m := listenRe.FindStringSubmatch(line); m != nil {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	go func() { d.cmd.Wait(); pw.Close(); close(d.exited) }()
	select {
	case m := <-found:
		d.agent, d.web = m[1], m[2]
	case <-time.After(30 * time.Second):
		t.Fatalf("gentraced did not start: %s", d.log)
	}
	return d
}

// stop ends the daemon by its PID: SIGTERM (drain), SIGKILL after 10 s.
func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
}

// kill ends it by SIGKILL: no drain, ACKs lost.
func (d *daemon) kill() {
	d.cmd.Process.Kill()
	<-d.exited
}

func (d *daemon) get(t *testing.T, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + d.web + path)
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

type agentRow struct {
	Session     string            `json:"session"`
	Service     string            `json:"service"`
	Tags        map[string]string `json:"tags"`
	Generations uint64            `json:"generations"`
}

func (d *daemon) agents(t *testing.T) []agentRow {
	_, b := d.get(t, "/v1/agents")
	var v struct {
		Agents []agentRow `json:"agents"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v.Agents
}

// storedGen is one generation of a gentrace-format download, read with
// this file's own minimal reader of FORMAT.md (records, GEN_END ledger).
type storedGen struct {
	gen                        uint64
	goBytes                    []byte // GOTRACE payloads concatenated
	gotrace                    int    // GOTRACE records
	dropped, evicted, rejected uint64
}

func readGentrace(t *testing.T, b []byte) []storedGen {
	t.Helper()
	if len(b) < 16 || string(b[:8]) != "gentrace" {
		t.Fatalf("not a gentrace file: %q", b[:min(len(b), 16)])
	}
	p := b[16:]
	var out []storedGen
	var cur *storedGen
	for len(p) > 0 {
		typ := p[0]
		n, k := binary.Uvarint(p[1:])
		if k <= 0 || uint64(len(p)-1-k) < n {
			t.Fatal("bad record")
		}
		pl := p[1+k : 1+k+int(n)]
		p = p[1+k+int(n):]
		switch typ {
		case 1:
			out = append(out, storedGen{})
			cur = &out[len(out)-1]
		case 8:
			cur.goBytes = append(cur.goBytes, pl...)
			cur.gotrace++
		case 7:
			var v [9]uint64
			for i := 0; i < 9; i++ {
				if i == 4 {
					pl = pl[4:] // crc u32le
					continue
				}
				x, k := binary.Uvarint(pl)
				if k <= 0 {
					t.Fatal("bad GEN_END")
				}
				v[i], pl = x, pl[k:]
			}
			cur.gen, cur.dropped, cur.evicted, cur.rejected = v[0], v[6], v[7], v[8]
			cur = nil
		}
	}
	return out
}

func mustEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func cliPath(t *testing.T) string {
	p := os.Getenv("GENTRACE_CLI")
	if p == "" {
		t.Skip("GENTRACE_CLI is not set")
	}
	return p
}

func runCLI(t *testing.T, args ...string) (string, error) {
	out, err := exec.Command(cliPath(t), args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

var _ = fmt.Sprintf
