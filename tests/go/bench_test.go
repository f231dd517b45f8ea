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

// benchRound runs the traced program (op in a loop) for d and returns
// per operation: wall and process CPU nanoseconds (user + system, every
// thread: the client's sender goroutine included, the daemon not), the
// system share of that CPU, and the garbage collections of the round.
type roundRes struct {
	wall, cpu, sys, gcs float64
	ops                 int64
}

func benchRound(d time.Duration, op func()) roundRes {
	cpuNow := func() (int64, int64) {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano(), ru.Stime.Nano()
	}
	for i := 0; i < 10000; i++ { // warm up: strings and stacks interned
		op()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, s0 := cpuNow()
	t0 := time.Now()
	var n int64
	for time.Since(t0) < d {
		for i := 0; i < 1024; i++ {
			op()
		}
		n += 1024
	}
	t1 := time.Now()
	c1, s1 := cpuNow()
	runtime.ReadMemStats(&m1)
	f := float64(n)
	return roundRes{float64(t1.Sub(t0).Nanoseconds()) / f, float64(c1-c0) / f,
		float64(s1-s0) / f, float64(m1.NumGC - m0.NumGC), n + 10000}
}

// TestBenchGo (make bench-go; GENTRACE_BENCH=1): the same Go program
// traced into io.Discard and traced through the client into a real
// gentraced, in alternating rounds of one run (ABBA...: the order flips
// every round); prints BENCH lines with the medians (wall time per
// operation, and this process's CPU time per operation, which leaves out
// the daemon sharing the machine), their min and max, and the median of
// the rounds' ratios, for two programs: the tracing loop (worst case:
// nothing but trace) and a small service's requests. The goal (bar) is a
// ratio within 1.02.
//
// bench/go.sh runs it in several set-ups (GENTRACE_BENCH_SETUP names one,
// appended to the ids): as is, and with gentraced on one CPU and this
// process on the other (GENTRACE_BENCH_DAEMON, a command that execs the
// daemon, e.g. "taskset -c 0"), as in production where the daemon is
// another machine. GENTRACE_BENCH_ROUNDS: rounds (default 9, at least 5).
// GENTRACE_BENCH_PROFILE=dir: a CPU profile of each arm of each round.
func TestBenchGo(t *testing.T) {
	if os.Getenv("GENTRACE_BENCH") == "" {
		t.Skip("a benchmark: make bench-go")
	}
	daemonPrefix = strings.Fields(os.Getenv("GENTRACE_BENCH_DAEMON"))
	defer func() { daemonPrefix = nil }()
	d := startDaemon(t, t.TempDir(), "")
	t.Logf("set-up %q: daemon %q, GOMAXPROCS %d, load %s", benchSetup(), daemonPrefix,
		runtime.GOMAXPROCS(0), loadAvg())
	benchGo(t, d, "go_client", opLoop)
	benchGo(t, d, "go_client_service", opService)
	t.Logf("load %s", loadAvg())
}

var floorVal float64

func socketFloorOnce(t *testing.T) float64 {
	if floorVal == 0 {
		floorVal = socketFloor(t)
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

func benchGo(t *testing.T, d *daemon, id string, op func()) {
	rounds := 9
	if n, err := strconv.Atoi(os.Getenv("GENTRACE_BENCH_ROUNDS")); err == nil && n >= 5 {
		rounds = n
	}
	if s := benchSetup(); s != "" {
		id += "_" + s
	}
	prof := os.Getenv("GENTRACE_BENCH_PROFILE")
	var dw, dc, cw, cc, ds, cs, dg, cg []float64
	var traceBytes, discardOps int64
	var st gentrace.Stats
	for r := 0; r < rounds; r++ {
		for _, viaClient := range []bool{r%2 == 1, r%2 == 0} {
			if viaClient {
				if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "bench-go"}); err != nil {
					t.Fatal(err)
				}
			} else if err := rtrace.Start(discardW{&traceBytes}); err != nil {
				t.Fatal(err)
			}
			if prof != "" {
				arm := map[bool]string{false: "discard", true: "client"}[viaClient]
				f, err := os.Create(filepath.Join(prof, fmt.Sprintf("%s.%s.%d.pprof", id, arm, r)))
				if err != nil {
					t.Fatal(err)
				}
				pprof.StartCPUProfile(f)
				defer f.Close()
			}
			res := benchRound(1500*time.Millisecond, op)
			w, c := res.wall, res.cpu
			if prof != "" {
				pprof.StopCPUProfile()
			}
			if viaClient {
				if err := gentrace.Stop(); err != nil {
					t.Fatal(err)
				}
				st = gentrace.GetStats()
				cw, cc = append(cw, w), append(cc, c)
				cs, cg = append(cs, res.sys), append(cg, res.gcs)
			} else {
				rtrace.Stop()
				dw, dc = append(dw, w), append(dc, c)
				discardOps += res.ops
				ds, dg = append(ds, res.sys), append(dg, res.gcs)
			}
		}
	}
	sorted := func(v []float64) []float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s
	}
	med := func(v []float64) float64 { return sorted(v)[len(v)/2] }
	t.Logf("%s wall ns/op: client %.0f, io.Discard %.0f", id, cw, dw)
	t.Logf("%s cpu ns/op: client %.0f, io.Discard %.0f", id, cc, dc)
	t.Logf("%s of which system ns/op: client %.1f, io.Discard %.1f", id, cs, ds)
	t.Logf("%s GCs per round: client %.0f, io.Discard %.0f", id, cg, dg)
	perOp := float64(traceBytes) / float64(discardOps)
	t.Logf("%s trace bytes per op: %.1f (io.Discard rounds, warm-up included)", id, perOp)
	if floor := socketFloorOnce(t); floor > 0 {
		t.Logf("%s TCP send floor: %.3f ns/B x %.1f B/op = %.1f ns/op, %.1f%% of io.Discard's %.0f ns/op",
			id, floor, perOp, floor*perOp, 100*floor*perOp/med(dc), med(dc))
	}
	t.Logf("%s last client run: %+v", id, st)
	// Each round runs both, back to back: the median of the per-round
	// ratios follows the machine's load less than a ratio of medians.
	ratios := func(c, b []float64) []float64 {
		r := make([]float64, len(c))
		for i := range c {
			r[i] = c[i] / b[i]
		}
		return sorted(r)
	}
	for _, m := range []struct {
		id   string
		c, b []float64
	}{{id + "_wall", cw, dw}, {id + "_cpu", cc, dc}} {
		rs := ratios(m.c, m.b)
		ratio := rs[len(rs)/2]
		pass := 0
		if ratio <= 1.02 {
			pass = 1
		}
		vs := sorted(m.c)
		fmt.Printf("BENCH id=%s value=%.1f min=%.1f max=%.1f reps=%d unit=ns/op baseline=io_discard:%.1f ratio=%.3f ratio_min=%.3f ratio_max=%.3f bar=1.02 pass=%d\n",
			m.id, med(m.c), vs[0], vs[len(vs)-1], len(vs), med(m.b), ratio, rs[0], rs[len(rs)-1], pass)
	}
}

// discardW counts what the runtime wrote: the trace bytes per operation.
type discardW struct{ n *int64 }

func (w discardW) Write(p []byte) (int, error) {
	*w.n += int64(len(p))
	return len(p), nil
}

// socketFloor measures what any client pays to send trace bytes to a
// daemon on this machine over TCP: this process's CPU (user + system)
// per byte written, in 128 KiB writev calls as the client makes them, to
// a reader that discards them: this test binary run again as
// TestBenchGoSink, on the daemon's CPU (the daemon prefix, e.g. taskset).
func socketFloor(t *testing.T) (nsPerByte float64) {
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
	defer cmd.Wait()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	hdr, chunk := make([]byte, 12), make([]byte, 128<<10)
	const total = 256 << 20
	var best float64
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
		v := float64(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) / total
		if r == 0 || v < best {
			best = v
		}
	}
	return best
}

// TestBenchGoSink is socketFloor's reader, run in a process of its own.
func TestBenchGoSink(t *testing.T) {
	addr := os.Getenv("GENTRACE_BENCH_SINK")
	if addr == "" {
		t.Skip("socketFloor's reader")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c)
}
