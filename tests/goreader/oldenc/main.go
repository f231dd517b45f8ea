// Command oldenc writes a Go execution trace in the old format that the
// runtimes of Go 1.11 through 1.18 wrote (they all write the header
// "go 1.11 trace": the format did not change between them; 1.19 added CPU
// samples and its own header). No toolchain of those versions can be had
// here, so the tests build such files with this test-only encoder, written
// from the format's event table, and check each with
// golang.org/x/exp/trace (tests/goreader/xtrace), whose old-format reader
// is independent of gentrace's.
//
// The trace is a small program: goroutine 1 on P 0 creates tasks, runs a
// region in each and logs, then hands the task to goroutine 2 (unblocks it
// and blocks on a send); goroutine 2 on P 1 runs a region, logs and ends
// the task (on another goroutine and P than the one that created it), then
// unblocks goroutine 1 and blocks on a receive. Around that: goroutines
// that existed at trace start (one waiting, one the timer goroutine that Go
// 1.11-1.13 had), a GC cycle with its stop-the-world and sweep, heap
// events, a system call, a GC mark worker started with a label, and the
// stack and string tables. It prints what it wrote:
// "regions=R tasks=T logs=L".
//
//	oldenc [-o FILE] [-n TASKS] [-version 11] [-cpusample]
//
// -cpusample adds a CPU sample event, which only Go 1.19+ traces may hold:
// readers must refuse the file as a 1.11 trace.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
)

// Event types of the old format (the table both readers follow).
const (
	evBatch             = 1  // [pid, ticks]
	evFrequency         = 2  // [freq]
	evStack             = 3  // [id, n, (pc, func, file, line) x n]
	evGomaxprocs        = 4  // [ts, procs, stack]
	evProcStart         = 5  // [ts, thread]
	evProcStop          = 6  // [ts]
	evGCStart           = 7  // [ts, seq, stack]
	evGCDone            = 8  // [ts]
	evSTWStart          = 9  // [ts, kind]
	evSTWDone           = 10 // [ts]
	evGCSweepStart      = 11 // [ts, stack]
	evGCSweepDone       = 12 // [ts, swept, reclaimed]
	evGoCreate          = 13 // [ts, g, new stack, stack]
	evGoStart           = 14 // [ts, g, seq]
	evGoBlockSend       = 22 // [ts, stack]
	evGoBlockRecv       = 23 // [ts, stack]
	evGoBlockGC         = 42 // [ts, stack]
	evGoUnblock         = 21 // [ts, g, seq, stack]
	evGoSysCall         = 28 // [ts, stack]
	evGoWaiting         = 31 // [ts, g]
	evHeapAlloc         = 33 // [ts, mem]
	evHeapGoal          = 34 // [ts, mem]
	evTimerGoroutine    = 35 // [g] (no timestamp)
	evString            = 37 // id, len, bytes
	evGoStartLabel      = 41 // [ts, g, seq, label]
	evGCMarkAssistStart = 43 // [ts, stack]
	evGCMarkAssistDone  = 44 // [ts]
	evUserTaskCreate    = 45 // [ts, task, parent, name, stack]
	evUserTaskEnd       = 46 // [ts, task, stack]
	evUserRegion        = 47 // [ts, task, mode, name, stack]
	evUserLog           = 48 // [ts, task, key, stack] value
	evCPUSample         = 49 // [ts, real ts, p, g, stack] (1.19+)
)

// A P's events are written into its current batch; batches of all Ps are
// written to the file in the order they were cut.
type enc struct {
	out     []byte
	ps      map[int]*pbuf
	now     uint64            // the trace clock: one tick = 1 ns
	seq     map[uint64]uint64 // each goroutine's sequence number
	strings map[string]uint64
}

type pbuf struct {
	id     int
	b      []byte
	lastTs uint64
}

func newEnc() *enc {
	return &enc{ps: map[int]*pbuf{}, now: 1000, seq: map[uint64]uint64{},
		strings: map[string]uint64{}}
}

func uv(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// p returns P id's buffer, starting a batch at the current time if none is
// open.
func (e *enc) p(id int) *pbuf {
	pb := e.ps[id]
	if pb == nil {
		pb = &pbuf{id: id, lastTs: e.now}
		pb.b = append(pb.b, evBatch|1<<6)
		pb.b = uv(pb.b, uint64(id))
		pb.b = uv(pb.b, e.now)
		e.ps[id] = pb
	}
	return pb
}

// flush ends P id's batch: its bytes go to the file, the next event on
// that P opens a new batch (as a runtime flushing a full buffer does).
func (e *enc) flush(id int) {
	if pb := e.ps[id]; pb != nil {
		e.out = append(e.out, pb.b...)
		delete(e.ps, id)
	}
}

// ev writes a timed event on P id: the timestamp (as a difference from the
// batch's last one) and args; four values or more are length-prefixed.
func (e *enc) ev(id int, typ byte, args ...uint64) {
	e.now += 10
	pb := e.p(id)
	vals := uv(nil, e.now-pb.lastTs)
	pb.lastTs = e.now
	for _, a := range args {
		vals = uv(vals, a)
	}
	e.put(pb, typ, 1+len(args), vals)
}

func (e *enc) put(pb *pbuf, typ byte, nvals int, vals []byte) {
	if nvals <= 3 {
		pb.b = append(pb.b, typ|byte(nvals-1)<<6)
	} else {
		pb.b = append(pb.b, typ|3<<6)
		pb.b = uv(pb.b, uint64(len(vals)))
	}
	pb.b = append(pb.b, vals...)
}

// str interns s, writing its EvString on P id the first time.
func (e *enc) str(id int, s string) uint64 {
	if v, ok := e.strings[s]; ok {
		return v
	}
	v := uint64(len(e.strings) + 1)
	e.strings[s] = v
	pb := e.p(id)
	pb.b = append(pb.b, evString)
	pb.b = uv(pb.b, v)
	pb.b = uv(pb.b, uint64(len(s)))
	pb.b = append(pb.b, s...)
	return v
}

// nextSeq returns goroutine g's sequence number for a start or unblock
// event (the count of such transitions readers expect next) and advances it.
func (e *enc) nextSeq(g uint64) uint64 {
	s := e.seq[g]
	e.seq[g]++
	return s
}

func main() {
	out := flag.String("o", "old.trace", "trace file to write")
	n := flag.Int("n", 50, "tasks")
	version := flag.Int("version", 11, "header version (11: the format of Go 1.11-1.18)")
	cpu := flag.Bool("cpusample", false, "add a CPU sample (1.19+ only: makes a 1.11 file invalid)")
	flag.Parse()

	e := newEnc()
	const stkMain, stkWorker, stkUser = 1, 2, 3
	// Trace start (the runtime's StartTrace on P 0): the goroutines that
	// exist, the waiting ones marked so, the timer goroutine named, then
	// the P and the running goroutine, then GOMAXPROCS.
	e.ev(0, evGoCreate, 1, stkMain, 0)
	e.seq[1] = 1
	e.ev(0, evGoCreate, 2, stkWorker, 0)
	e.seq[2] = 1
	e.ev(0, evGoWaiting, 2)
	e.seq[2]++
	e.ev(0, evGoCreate, 3, stkWorker, 0)
	e.seq[3] = 1
	e.ev(0, evGoWaiting, 3)
	e.seq[3]++
	pb := e.p(0)
	e.put(pb, evTimerGoroutine, 1, uv(nil, 3))
	e.ev(0, evProcStart, 7)
	e.ev(0, evGoStart, 1, e.nextSeq(1))
	e.ev(0, evGomaxprocs, 2, stkMain)
	e.ev(1, evProcStart, 8)

	job := e.str(0, "job")
	produce := e.str(0, "produce")
	work := e.str(0, "work")
	queue := e.str(0, "queue")
	done := e.str(0, "done")
	regions, tasks, logs := 0, 0, 0
	log := func(p int, task, key uint64, msg string) {
		e.now += 10
		pb := e.p(p)
		vals := uv(nil, e.now-pb.lastTs)
		pb.lastTs = e.now
		vals = uv(vals, task)
		vals = uv(vals, key)
		vals = uv(vals, stkUser)
		e.put(pb, evUserLog, 4, vals)
		pb.b = uv(pb.b, uint64(len(msg)))
		pb.b = append(pb.b, msg...)
		logs++
	}
	g2Running := false
	for i := 1; i <= *n; i++ {
		task := uint64(i)
		// 10 ms between tasks: the importer cuts a generation per second
		// of trace time, so -n 300 makes several.
		e.now += 10_000_000
		// Goroutine 1 on P 0.
		e.ev(0, evUserTaskCreate, task, 0, job, stkUser)
		tasks++
		e.ev(0, evUserRegion, task, 0, produce, stkUser)
		log(0, task, queue, fmt.Sprintf("enqueued %d", i))
		e.ev(0, evUserRegion, task, 1, produce, stkUser)
		regions++
		if i == *n/2 {
			// A system call, a GC with its STW (kind 0: mark termination
			// before Go 1.21), a mark assist, sweep and heap figures, a
			// GC worker (goroutine 4) run with its label on P 1.
			e.ev(0, evGoSysCall, stkUser)
			e.ev(0, evGoCreate, 4, stkWorker, stkUser)
			e.seq[4] = 1
			e.ev(0, evGCStart, 0, stkUser)
			e.ev(0, evSTWStart, 1)
			e.ev(0, evSTWDone)
			e.ev(0, evGCMarkAssistStart, stkUser)
			e.ev(0, evGCMarkAssistDone)
			e.ev(1, evGoStartLabel, 4, e.nextSeq(4), e.str(1, "GC (dedicated)"))
			e.ev(1, evGoBlockGC, stkUser)
			e.ev(0, evHeapAlloc, 4<<20)
			e.ev(0, evSTWStart, 0)
			e.ev(0, evGCDone)
			e.ev(0, evSTWDone)
			e.ev(0, evGCSweepStart, stkUser)
			e.ev(0, evGCSweepDone, 4096, 0)
			e.ev(0, evHeapGoal, 8<<20)
			if *cpu {
				pb := e.p(0)
				e.now += 10
				vals := uv(nil, e.now-pb.lastTs)
				pb.lastTs = e.now
				for _, a := range []uint64{e.now, 0, 1, stkUser} {
					vals = uv(vals, a)
				}
				e.put(pb, evCPUSample, 5, vals)
			}
		}
		// Hand the task to goroutine 2 and block on the send.
		e.ev(0, evGoUnblock, 2, e.nextSeq(2), stkUser)
		e.ev(0, evGoBlockSend, stkUser)
		// Goroutine 2 on P 1 ends the task there.
		e.ev(1, evGoStart, 2, e.nextSeq(2))
		g2Running = true
		e.ev(1, evUserRegion, task, 0, work, stkUser)
		log(1, task, done, fmt.Sprintf("job %d done", i))
		e.ev(1, evUserRegion, task, 1, work, stkUser)
		regions++
		e.ev(1, evUserTaskEnd, task, stkUser)
		e.ev(1, evGoUnblock, 1, e.nextSeq(1), stkUser)
		e.ev(1, evGoBlockRecv, stkUser)
		g2Running = false
		e.ev(0, evGoStart, 1, e.nextSeq(1))
		if i%16 == 0 { // full buffers: batches cut mid-run
			e.flush(0)
			e.flush(1)
		}
	}
	_ = g2Running
	e.ev(1, evProcStop)
	e.flush(0)
	e.flush(1)
	// Footer, as StopTrace writes it: a batch with the frequency and the
	// stack table (function and file names are strings).
	fnMain, fnWorker, fnUser := e.str(0, "main.main"), e.str(0, "main.worker"), e.str(0, "runtime/trace.Log")
	file := e.str(0, "main.go")
	pb = e.p(0)
	e.put(pb, evFrequency, 1, uv(nil, 1e9))
	for _, s := range []struct{ id, pc, fn, line uint64 }{
		{stkMain, 0x401000, fnMain, 10}, {stkWorker, 0x402000, fnWorker, 20}, {stkUser, 0x403000, fnUser, 30},
	} {
		vals := uv(nil, s.id)
		vals = uv(vals, 1)
		vals = uv(vals, s.pc)
		vals = uv(vals, s.fn)
		vals = uv(vals, file)
		vals = uv(vals, s.line)
		e.put(pb, evStack, 4, vals)
	}
	e.flush(0)

	hdr := fmt.Sprintf("go 1.%d trace\x00\x00\x00", *version)
	data := append([]byte(hdr), e.out...)
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("regions=%d tasks=%d logs=%d\n", regions, tasks, logs)
}
