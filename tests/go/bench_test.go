package gotest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	rtrace "runtime/trace"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gentrace"
)

// opLoop is the worst case: a program that does nothing but trace (a
// region and a log per operation, about 28 MB/s of trace per core).
func opLoop() {
	ctx := context.Background()
	rtrace.WithRegion(ctx, "op", func() {
		rtrace.Log(ctx, "bench", "value")
	})
}

// opService is a request of a small service: a region around decoding a
// JSON request, hashing its payload and encoding the answer, with a log
// (a few microseconds of work per region, as a handler has at least).
type benchReq struct {
	ID      int    `json:"id"`
	User    string `json:"user"`
	Payload []byte `json:"payload"`
}

var serviceReq = func() []byte {
	b, _ := json.Marshal(benchReq{ID: 7, User: "alice", Payload: make([]byte, 512)})
	return b
}()

func opService() {
	ctx := context.Background()
	rtrace.WithRegion(ctx, "handle", func() {
		var r benchReq
		if err := json.Unmarshal(serviceReq, &r); err != nil {
			panic(err)
		}
		sum := sha256.Sum256(r.Payload)
		out, _ := json.Marshal(struct {
			ID  int    `json:"id"`
			Sum []byte `json:"sum"`
		}{r.ID, sum[:]})
		rtrace.Log(ctx, "handled", r.User)
		benchSink += len(out)
	})
}

var benchSink int

// benchRound runs the traced program (op in a loop) for d, then stop
// (which ends tracing), and returns per operation: wall nanoseconds of
// the loop, and process CPU nanoseconds (user + system, every thread: the
// client's sender goroutine included, the daemon not) of the loop and the
// stop (the client may still be sending the round's bytes when the loop
// ends: that CPU is the round's too), the system share of that CPU, and
// per round the garbage collections and the context switches of the
// process.
type roundRes struct {
	wall, cpu, sys, gcs, csw float64
	ops                      int64
}

func benchRound(d time.Duration, op func(), stop func()) roundRes {
	usage := func() (cpu, sys, csw int64) {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano(), ru.Stime.Nano(), ru.Nvcsw + ru.Nivcsw
	}
	for i := 0; i < 10000; i++ { // warm up: strings and stacks interned
		op()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, s0, x0 := usage()
	t0 := time.Now()
	var n int64
	for time.Since(t0) < d {
		for i := 0; i < 1024; i++ {
			op()
		}
		n += 1024
	}
	t1 := time.Now()
	stop()
	c1, s1, x1 := usage()
	runtime.ReadMemStats(&m1)
	f := float64(n)
	return roundRes{float64(t1.Sub(t0).Nanoseconds()) / f, float64(c1-c0) / f,
		float64(s1-s0) / f, float64(m1.NumGC - m0.NumGC), float64(x1 - x0), n + 10000}
}

// TestBenchGo (make bench-go; GENTRACE_BENCH=1): the same Go program
// traced three ways in alternating rounds of one run (the order rotates
// every round):
//
//	io_discard  runtime/trace into a writer that drops the bytes
//	client      through the client into a real gentraced
//	socket      the kernel's floor: every byte the runtime writes sent
//	            as it comes to a TCP reader that discards it (in the
//	            runtime's trace reader goroutine: no copy, no CRC, no
//	            spool, no protocol; what any client that streams over TCP
//	            on this machine pays at least)
//
// It prints BENCH lines with the medians (wall time per operation, and
// this process's CPU time per operation, which leaves out the daemon and
// the reader), their min and max, and the median of the rounds' ratios,
// for two programs: the tracing loop (worst case: nothing but trace) and
// a small service's requests. The goal (bar) is the client within 1.02
// of io_discard; client over socket is the client's own share.
//
// The client is given room to keep every generation (a 512 MiB spool, a
// daemon taking generations up to 256 MiB and buffering up to 1 GiB per
// connection): the loop writes about 100 MB of trace per CPU second, so a
// one-second Go generation is over the default limits (half of a 64 MiB
// spool, the daemon's 64M generations and 64M per connection), and a
// client dropping the rest of each generation would be measured doing
// less than its job. Stop waits (up to a minute) until the daemon stored every
// generation, and its CPU counts; every round's losses are logged.
//
// bench/go.sh runs it in several set-ups (GENTRACE_BENCH_SETUP names one,
// appended to the ids): as is, with gentraced (and the socket arm's
// reader) on one CPU and this process on the other (GENTRACE_BENCH_DAEMON,
// a command that execs the daemon, e.g. "taskset -c 0"), and that with
// loopback's receive processing steered to the daemon's CPU (RPS), as in
// production where the daemon is another machine. GENTRACE_BENCH_ROUNDS:
// rounds (default 9, at least 5). GENTRACE_BENCH_PROFILE=dir: a CPU
// profile of each arm of each round. GENTRACE_BENCH_ONLY=loop or service:
// only that program; GENTRACE_BENCH_ARMS=client (or socket, io_discard):
// only those arms, e.g. under perf.
func TestBenchGo(t *testing.T) {
	if os.Getenv("GENTRACE_BENCH") == "" {
		t.Skip("a benchmark: make bench-go")
	}
	daemonPrefix = strings.Fields(os.Getenv("GENTRACE_BENCH_DAEMON"))
	defer func() { daemonPrefix = nil }()
	d := startDaemon(t, t.TempDir(), "", "--max-gen-size", "256M",
		"--max-conn-buffer", "1G", "--max-buffer", "2G")
	sink := startSink(t)
	rps, _ := os.ReadFile("/sys/class/net/lo/queues/rx-0/rps_cpus")
	t.Logf("set-up %q: daemon %q, GOMAXPROCS %d, lo rps_cpus %s, load %s", benchSetup(), daemonPrefix,
		runtime.GOMAXPROCS(0), strings.TrimSpace(string(rps)), loadAvg())
	only := os.Getenv("GENTRACE_BENCH_ONLY") // loop or service: one program
	if only != "service" {
		benchGo(t, d, sink, "go_client", opLoop)
	}
	if only != "loop" {
		benchGo(t, d, sink, "go_client_service", opService)
	}
	t.Logf("load %s", loadAvg())
}

var floorVal float64

func socketFloorOnce(t *testing.T, sink net.Conn) float64 {
	if floorVal == 0 {
		floorVal = socketFloor(t, sink)
		t.Logf("TCP send floor (128 KiB writev to a reader on the daemon's CPU): %.3f ns per byte of this process's CPU", floorVal)
	}
	return floorVal
}

func benchSetup() string { return os.Getenv("GENTRACE_BENCH_SETUP") }

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

const (
	armDiscard = iota
	armClient
	armSocket
	nArms
)

var armName = [nArms]string{"io_discard", "client", "socket"}

// armOn: GENTRACE_BENCH_ARMS (e.g. "client", for perf) runs only the
// arms it names; their ratios against the others are then not printed.
func armOn(arm int) bool {
	only := os.Getenv("GENTRACE_BENCH_ARMS")
	return only == "" || strings.Contains(only, armName[arm])
}

// armRounds: one arm's figures, a value per round.
type armRounds struct{ wall, cpu, sys, gcs, csw []float64 }

func (a *armRounds) add(r roundRes) {
	a.wall, a.cpu, a.sys = append(a.wall, r.wall), append(a.cpu, r.cpu), append(a.sys, r.sys)
	a.gcs, a.csw = append(a.gcs, r.gcs), append(a.csw, r.csw)
}

func benchGo(t *testing.T, d *daemon, sink net.Conn, id string, op func()) {
	rounds := 9
	if n, err := strconv.Atoi(os.Getenv("GENTRACE_BENCH_ROUNDS")); err == nil && n >= 5 {
		rounds = n
	}
	if s := benchSetup(); s != "" {
		id += "_" + s
	}
	prof := os.Getenv("GENTRACE_BENCH_PROFILE")
	var arms [nArms]armRounds
	var dw discardW
	var discardOps int64
	var st gentrace.Stats
	var lost uint64
	for r := 0; r < rounds; r++ {
		for i := 0; i < nArms; i++ {
			arm := (r + i) % nArms
			if !armOn(arm) {
				continue
			}
			var err error
			switch arm {
			case armClient:
				err = gentrace.Start(gentrace.Config{Addr: d.agent, Service: "bench-go",
					SpoolBytes: 512 << 20, FlushTimeout: 60 * time.Second})
			case armDiscard:
				err = rtrace.Start(&dw)
			case armSocket:
				err = rtrace.Start(sink)
			}
			if err != nil {
				t.Fatal(err)
			}
			if prof != "" {
				f, err := os.Create(filepath.Join(prof, fmt.Sprintf("%s.%s.%d.pprof", id, armName[arm], r)))
				if err != nil {
					t.Fatal(err)
				}
				pprof.StartCPUProfile(f)
				defer f.Close()
			}
			stop := rtrace.Stop
			if arm == armClient {
				stop = func() {
					if err := gentrace.Stop(); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := benchRound(1500*time.Millisecond, op, stop)
			if prof != "" {
				pprof.StopCPUProfile()
			}
			if arm == armClient {
				st = gentrace.GetStats()
				if n := st.Generations - st.Stored; n > 0 {
					lost += n
					t.Logf("%s round %d: %d generations not stored: %+v", id, r, n, st)
					if l := d.log.String(); len(l) > 2000 {
						t.Logf("daemon log: ...%s", l[len(l)-2000:])
					} else {
						t.Logf("daemon log: %s", l)
					}
				}
			}
			if arm == armDiscard {
				discardOps += res.ops
			}
			arms[arm].add(res)
		}
	}
	if os.Getenv("GENTRACE_BENCH_ARMS") != "" {
		for a := 0; a < nArms; a++ {
			t.Logf("%s %s cpu ns/op: %.0f", id, armName[a], arms[a].cpu)
		}
		return
	}
	sorted := func(v []float64) []float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s
	}
	med := func(v []float64) float64 { return sorted(v)[len(v)/2] }
	for _, m := range []struct {
		what string
		f    func(a *armRounds) []float64
		pr   string
	}{
		{"wall ns/op", func(a *armRounds) []float64 { return a.wall }, "%.0f"},
		{"cpu ns/op", func(a *armRounds) []float64 { return a.cpu }, "%.0f"},
		{"of which system ns/op", func(a *armRounds) []float64 { return a.sys }, "%.1f"},
		{"GCs per round", func(a *armRounds) []float64 { return a.gcs }, "%.0f"},
		{"context switches per round", func(a *armRounds) []float64 { return a.csw }, "%.0f"},
	} {
		line := id + " " + m.what + ":"
		for a := 0; a < nArms; a++ {
			line += fmt.Sprintf(" %s "+m.pr, armName[a], m.f(&arms[a]))
		}
		t.Log(line)
	}
	perOp := float64(dw.n) / float64(discardOps)
	t.Logf("%s trace bytes per op: %.1f, %.0f bytes per runtime Write (io.Discard rounds, warm-up included)",
		id, perOp, float64(dw.n)/float64(dw.writes))
	disc := med(arms[armDiscard].cpu)
	if floor := socketFloorOnce(t, sink); floor > 0 {
		t.Logf("%s TCP send floor: %.3f ns/B x %.1f B/op = %.1f ns/op, %.1f%% of io.Discard's %.0f ns/op",
			id, floor, perOp, floor*perOp, 100*floor*perOp/disc, disc)
	}
	t.Logf("%s last client run: %+v; generations lost over all rounds: %d", id, st, lost)
	// Each round runs every arm, back to back: the median of the per-round
	// ratios follows the machine's load less than a ratio of medians.
	ratios := func(c, b []float64) []float64 {
		r := make([]float64, len(c))
		for i := range c {
			r[i] = c[i] / b[i]
		}
		return sorted(r)
	}
	for _, m := range []struct {
		id        string
		arm, base int
		bar       string
	}{
		{id + "_wall", armClient, armDiscard, "1.02"},
		{id + "_cpu", armClient, armDiscard, "1.02"},
		{id + "_socket_floor_cpu", armSocket, armDiscard, "none"},
		{id + "_over_socket_cpu", armClient, armSocket, "none"},
	} {
		pick := func(a int) []float64 { return arms[a].cpu }
		if strings.HasSuffix(m.id, "_wall") {
			pick = func(a int) []float64 { return arms[a].wall }
		}
		c, b := pick(m.arm), pick(m.base)
		rs := ratios(c, b)
		ratio := rs[len(rs)/2]
		pass := 1
		if m.bar != "none" && ratio > 1.02 {
			pass = 0
		}
		vs := sorted(c)
		fmt.Printf("BENCH id=%s value=%.1f min=%.1f max=%.1f reps=%d unit=ns/op baseline=%s:%.1f ratio=%.3f ratio_min=%.3f ratio_max=%.3f bar=%s pass=%d\n",
			m.id, med(c), vs[0], vs[len(vs)-1], len(vs), armName[m.base], med(b), ratio, rs[0], rs[len(rs)-1], m.bar, pass)
	}
}

// discardW counts what the runtime wrote: the trace bytes per operation,
// and the calls.
type discardW struct{ n, writes int64 }

func (w *discardW) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	w.writes++
	return len(p), nil
}

// startSink connects to a reader that discards what it reads: this test
// binary run again as TestBenchGoSink, on the daemon's CPU (the daemon
// prefix, e.g. taskset). The socket arm and socketFloor write to it.
func startSink(t *testing.T) net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	argv := append(append([]string(nil), daemonPrefix...), os.Args[0], "-test.run", "^TestBenchGoSink$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "GENTRACE_BENCH_SINK="+ln.Addr().String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetNoDelay(true)
	t.Cleanup(func() {
		c.Close() // the reader sees EOF and exits
		cmd.Wait()
	})
	return c
}

// socketFloor measures what any client pays to send trace bytes to a
// daemon on this machine over TCP: this process's CPU (user + system)
// per byte written, in 128 KiB writev calls as the client makes them, to
// the sink (startSink). The median of 5 x 256 MiB, logged with min and
// max.
func socketFloor(t *testing.T, c net.Conn) (nsPerByte float64) {
	hdr, chunk := make([]byte, 12), make([]byte, 128<<10)
	const total = 256 << 20
	var v []float64
	for r := 0; r < 5; r++ {
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		for n := 0; n < total; n += len(chunk) {
			b := net.Buffers{hdr, chunk}
			if _, err := b.WriteTo(c); err != nil {
				t.Fatal(err)
			}
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		v = append(v, float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano())/total)
	}
	sort.Float64s(v)
	t.Logf("TCP send floor, 5 x 256 MiB: median %.3f min %.3f max %.3f ns/B", v[2], v[0], v[4])
	return v[2]
}

// TestBenchGoSink is the sink's reader, run in a process of its own.
func TestBenchGoSink(t *testing.T) {
	addr := os.Getenv("GENTRACE_BENCH_SINK")
	if addr == "" {
		t.Skip("the benchmark's socket reader")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c)
}
