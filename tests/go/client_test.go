package gotest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	rtrace "runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"

	"gentrace"

	"golang.org/x/exp/trace"
)

// handoff is the known program: n tasks, each begun on a producer
// goroutine (region "produce", one log) and handed over a channel to a
// consumer goroutine (region "consume", one log) that ends it.
func handoff(n int, pause time.Duration) {
	type item struct {
		ctx  context.Context
		task *rtrace.Task
		i    int
	}
	ch := make(chan item)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for it := range ch {
			rtrace.WithRegion(it.ctx, "consume", func() {
				rtrace.Logf(it.ctx, "stage", "consume %d", it.i)
			})
			it.task.End()
		}
	}()
	for i := 0; i < n; i++ {
		ctx, task := rtrace.NewTask(context.Background(), "handoff")
		rtrace.WithRegion(ctx, "produce", func() {
			rtrace.Logf(ctx, "stage", "produce %d", i)
		})
		ch <- item{ctx, task, i}
		time.Sleep(pause)
	}
	close(ch)
	wg.Wait()
}

type seen struct {
	regions       map[string]int
	logs          map[string]int
	taskBegin     map[trace.TaskID]trace.GoID
	taskEnd       map[trace.TaskID]trace.GoID
	events, syncs int
}

// readGo parses a Go trace with golang.org/x/exp/trace and collects the
// handoff program's annotations.
func readGo(t *testing.T, b []byte) seen {
	t.Helper()
	s := seen{regions: map[string]int{}, logs: map[string]int{},
		taskBegin: map[trace.TaskID]trace.GoID{}, taskEnd: map[trace.TaskID]trace.GoID{}}
	handoffTasks := map[trace.TaskID]bool{}
	r, err := trace.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("x/exp/trace refuses the download: %v", err)
	}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("x/exp/trace: after %d events: %v", s.events, err)
		}
		s.events++
		switch ev.Kind() {
		case trace.EventSync:
			s.syncs++
		case trace.EventTaskBegin:
			if task := ev.Task(); task.Type == "handoff" {
				handoffTasks[task.ID] = true
				s.taskBegin[task.ID] = ev.Goroutine()
			}
		case trace.EventTaskEnd:
			if task := ev.Task(); handoffTasks[task.ID] {
				s.taskEnd[task.ID] = ev.Goroutine()
			}
		case trace.EventRegionBegin:
			s.regions[ev.Region().Type]++
		case trace.EventLog:
			if l := ev.Log(); l.Category == "stage" {
				s.logs[l.Message]++
			}
		}
	}
	return s
}

func checkHandoff(t *testing.T, s seen, n int) {
	t.Helper()
	mustEqual(t, "produce regions", s.regions["produce"], n)
	mustEqual(t, "consume regions", s.regions["consume"], n)
	mustEqual(t, "tasks begun", len(s.taskBegin), n)
	mustEqual(t, "tasks ended", len(s.taskEnd), n)
	for id, g := range s.taskBegin {
		if e, ok := s.taskEnd[id]; !ok || e == g {
			t.Fatalf("task %d begun on goroutine %d, ended on %d (want another one)", id, g, e)
		}
	}
	for i := 0; i < n; i++ {
		for _, m := range []string{fmt.Sprintf("produce %d", i), fmt.Sprintf("consume %d", i)} {
			if s.logs[m] != 1 {
				t.Fatalf("log %q seen %d times", m, s.logs[m])
			}
		}
	}
	mustEqual(t, "logs", len(s.logs), 2*n)
}

func TestKnownProgram_windowHoldsExactlyItsRegionsTasksAndLogs(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	const n = 40
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "handoff-svc",
		Tags: map[string]string{"env": "test"}}); err != nil {
		t.Fatal(err)
	}
	handoff(n, 60*time.Millisecond) // about 2.4 s: several generations
	st := gentrace.GetStats()
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	final := st.Generations // more are finished by Stop; count from the store
	if final < 2 {
		t.Fatalf("only %d generations in 2.4 s", final)
	}
	var row *agentRow
	for _, a := range d.agents(t) {
		if a.Session == st.Session {
			row = &a
		}
	}
	if row == nil {
		t.Fatalf("session %s not listed", st.Session)
	}
	mustEqual(t, "format tag", row.Tags["format"], "go")
	if !strings.HasPrefix(row.Tags["go_version"], "1.") || row.Tags["env"] != "test" {
		t.Fatalf("tags %v", row.Tags)
	}

	resp, goTrace := d.get(t, "/v1/trace?format=go&last=1h&session="+st.Session)
	mustEqual(t, "status", resp.StatusCode, 200)
	mustEqual(t, "omitted", resp.Header.Get("X-Gentrace-Omitted-Generations"), "0")
	mustEqual(t, "lost", resp.Header.Get("X-Gentrace-Lost-Generations"), "0")
	mustEqual(t, "generations header", resp.Header.Get("X-Gentrace-Generations"), fmt.Sprint(row.Generations))
	mustEqual(t, "header", string(goTrace[:16]), "go "+row.Tags["go_version"]+" trace\x00\x00\x00")
	s := readGo(t, goTrace)
	checkHandoff(t, s, n)
	if uint64(s.syncs) < final {
		t.Fatalf("%d generations (syncs) read, client finished %d before Stop", s.syncs, final)
	}

	// The same bytes by service, and from the CLI out of a gentrace file.
	_, bySvc := d.get(t, "/v1/trace?format=go&last=1h&service=handoff-svc")
	if !bytes.Equal(bySvc, goTrace) {
		t.Fatal("service= and session= windows differ")
	}
	_, native := d.get(t, "/v1/trace?last=1h&session="+st.Session)
	gens := readGentrace(t, native)
	var concat []byte
	for i, g := range gens {
		if g.gotrace == 0 {
			t.Fatalf("generation %d holds no GOTRACE record", g.gen)
		}
		if i > 0 && g.gen != gens[i-1].gen+1 {
			t.Fatalf("stored generations %d then %d", gens[i-1].gen, g.gen)
		}
		concat = append(concat, g.goBytes...)
	}
	if !bytes.Equal(concat, goTrace[16:]) {
		t.Fatal("format=go is not the concatenated GOTRACE records")
	}
	if p := os.Getenv("GENTRACE_CLI"); p != "" {
		dir := t.TempDir()
		in, out := filepath.Join(dir, "w.gentrace"), filepath.Join(dir, "w.trace")
		os.WriteFile(in, native, 0o644)
		if msg, err := runCLI(t, "convert", "--format", "go", "-o", out, in); err != nil {
			t.Fatalf("gentrace convert: %v: %s", err, msg)
		}
		if b, _ := os.ReadFile(out); !bytes.Equal(b, goTrace) {
			t.Fatal("gentrace convert --format go differs from format=go")
		}
	}

	// A second run of the same service: a service window now spans two
	// sessions, which one Go trace cannot hold.
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "handoff-svc"}); err != nil {
		t.Fatal(err)
	}
	handoff(3, time.Millisecond)
	st2 := gentrace.GetStats()
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	resp, body := d.get(t, "/v1/trace?format=go&last=1h&service=handoff-svc")
	mustEqual(t, "two sessions status", resp.StatusCode, 400)
	if !strings.Contains(string(body), st.Session) || !strings.Contains(string(body), st2.Session) {
		t.Fatalf("400 does not list both sessions: %s", body)
	}
	resp, b2 := d.get(t, "/v1/trace?format=go&last=1h&session="+st2.Session)
	mustEqual(t, "second session status", resp.StatusCode, 200)
	checkHandoff(t, readGo(t, b2), 3)

	// A session of a native agent is not a Go trace.
	native2 := nativeSession(t, d.agent)
	resp, body = d.get(t, "/v1/trace?format=go&last=1h&session="+native2)
	mustEqual(t, "native session status", resp.StatusCode, 400)
	if !strings.Contains(string(body), "not_a_go_session") {
		t.Fatalf("400 body %s", body)
	}
	resp, _ = d.get(t, "/v1/trace?format=go&last=1h&session=00000000000000000000000000000001")
	mustEqual(t, "unknown session status", resp.StatusCode, 404)
	// An empty window of a Go session: the Go header alone.
	resp, body = d.get(t, "/v1/trace?format=go&from=2001-01-01T00:00:00Z&to=2001-01-02T00:00:00Z&session="+st.Session)
	mustEqual(t, "empty window status", resp.StatusCode, 200)
	mustEqual(t, "empty window", string(body), "go "+row.Tags["go_version"]+" trace\x00\x00\x00")
	mustEqual(t, "empty window sessions", resp.Header.Get("X-Gentrace-Sessions"), "0")
	resp, _ = d.get(t, "/v1/trace?format=go&last=1h&service=no-such-service")
	mustEqual(t, "unknown service status", resp.StatusCode, 404)
	resp, _ = d.get(t, "/v1/trace?format=go&last=1h&session="+st.Session+"&bogus=1")
	mustEqual(t, "unknown parameter status", resp.StatusCode, 400)
	resp, _ = d.get(t, "/v1/trace?format=go&last=1h&session="+st.Session+"&service=x")
	mustEqual(t, "session and service status", resp.StatusCode, 400)
}

// nativeSession stores one generation (a CLOCK record only) of a session
// without format=go, speaking protocol version 2 by hand.
func nativeSession(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var sess [16]byte
	binary.LittleEndian.PutUint64(sess[:], uint64(time.Now().UnixNano()))
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	p := binary.LittleEndian.AppendUint32(nil, 0x4C485447)
	p = append(p, 2, 2)
	p = append(p, sess[:]...)
	p = append(p, make([]byte, 16)...) // session key
	p = str(str(p, "native-svc"), "h")
	p = append(p, 1, 0)
	p = str(p, "0.1.0")
	p = append(p, 0)
	p = str(p, "")
	frame := func(typ byte, pl []byte) {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(pl)))
		if _, err := c.Write(append(append(b, typ), pl...)); err != nil {
			t.Fatal(err)
		}
	}
	frame(1, p)
	now := uint64(time.Now().UnixNano())
	var ck []byte
	for _, v := range []uint64{1, 1, now, 2, 2, now + 1} {
		ck = binary.AppendUvarint(ck, v)
	}
	body := append([]byte{6, byte(len(ck))}, ck...)
	frame(3, append([]byte{1}, body...))
	ge := []byte{1, 1, 0, byte(len(body))}
	ge = binary.LittleEndian.AppendUint32(ge, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	frame(4, append(ge, 0, 0, 0, 0))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatalf("native session: %v", err)
		}
		pl := make([]byte, binary.LittleEndian.Uint32(hdr[:4]))
		io.ReadFull(c, pl)
		if hdr[4] == 5 {
			break // ACK
		}
		if hdr[4] == 7 {
			t.Fatalf("native session refused: %q", pl)
		}
	}
	return fmt.Sprintf("%x", sess)
}

// GENTRACE_TOKEN (the zero Config reads the environment): a daemon with
// --token refuses a client without it, and stores the one with it.
func TestToken_fromTheEnvironment(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "--token", "s3cret")
	t.Setenv("GENTRACE_ADDR", "127.0.0.1:1,"+d.agent) // failover: the first refuses
	t.Setenv("GENTRACE_SERVICE", "token-svc")
	t.Setenv("GENTRACE_TAGS", "team=core,zone=a")
	if err := gentrace.Start(gentrace.Config{FlushTimeout: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	handoff(2, 100*time.Millisecond)
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	if st := gentrace.GetStats(); st.Stored != 0 {
		t.Fatalf("stored without the token: %+v", st)
	}
	t.Setenv("GENTRACE_TOKEN", "s3cret")
	if err := gentrace.Start(gentrace.Config{}); err != nil {
		t.Fatal(err)
	}
	handoff(2, 100*time.Millisecond)
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	st := gentrace.GetStats()
	if st.Stored == 0 || st.Stored != st.Generations {
		t.Fatalf("with the token: %+v", st)
	}
	for _, a := range d.agents(t) {
		if a.Session == st.Session {
			mustEqual(t, "service", a.Service, "token-svc")
			mustEqual(t, "tag team", a.Tags["team"], "core")
			mustEqual(t, "tag zone", a.Tags["zone"], "a")
			mustEqual(t, "tag format", a.Tags["format"], "go")
			return
		}
	}
	t.Fatalf("session %s not listed", st.Session)
}

// A daemon with a short idle timeout (600 ms, so the client's heartbeat
// interval is 200 ms): heartbeats keep the one connection up for the whole
// run. Without them the runtime's one-second generations leave gaps the
// daemon times out (600 ms plus its 150 ms sweep is well under a second);
// with them the client may stall 400 ms (a loaded machine) and stay up.
func TestHeartbeats_keepAShortIdleConnectionUp(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "", "--idle-timeout", "600ms")
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "hb-svc"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // idle program: generations a second apart
	st := gentrace.GetStats()
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	if !st.Connected || st.Stored == 0 {
		t.Fatalf("stats %+v", st)
	}
	d.stop()
	<-d.logDone
	log := d.log.String()
	if n := strings.Count(log, "agent connected"); n != 1 {
		t.Fatalf("%d connections (want 1: no idle timeout):\n%s", n, log)
	}
	if strings.Contains(log, "TIMEOUT") {
		t.Fatalf("the daemon timed the client out:\n%s", log)
	}
}
