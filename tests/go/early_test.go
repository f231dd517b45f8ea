package gotest

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gentrace"
)

// Generations are sent as their chunks fill (go/early.go). A generation
// that grows past its share of a small spool after some of its chunks
// went out is dropped and aborted: the daemon discards it quietly (no
// rejection), and every Go generation is still either stored or counted
// in the ledger of a stored one, exactly.
func TestEarlySend_droppedGenerationAbortedExactLedger(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	// 1 MiB: a generation may take 512 KiB; an unpaced loop writes more
	// than that in a second, a paced one (1 ms sleep per op) far less.
	if err := gentrace.Start(gentrace.Config{Addr: d.agent, Service: "early-svc",
		SpoolBytes: 1 << 20, FlushTimeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	phase := func(every int, until func(gentrace.Stats) bool) gentrace.Stats {
		var stop atomic.Bool
		var ops atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); busy(&stop, &ops, every) }()
		deadline := time.Now().Add(60 * time.Second)
		var st gentrace.Stats
		for st = gentrace.GetStats(); !until(st) && time.Now().Before(deadline); st = gentrace.GetStats() {
			time.Sleep(10 * time.Millisecond)
		}
		stop.Store(true)
		wg.Wait()
		if !until(st) {
			t.Fatalf("timed out: %+v", st)
		}
		return st
	}
	// Small generations, stored.
	first := phase(1, func(s gentrace.Stats) bool { return s.Stored >= 2 })
	// Big ones: sent early, then dropped and aborted.
	big := phase(1<<30, func(s gentrace.Stats) bool { return s.Aborts >= 1 })
	// Small ones again: they carry the drops in their ledger.
	phase(1, func(s gentrace.Stats) bool { return s.Stored >= big.Stored+2 })
	if err := gentrace.Stop(); err != nil {
		t.Fatal(err)
	}
	fin := gentrace.GetStats()
	t.Logf("first %+v; big %+v; final %+v", first, big, fin)
	if fin.EarlyChunks == 0 || fin.Aborts == 0 || fin.Dropped < fin.Aborts {
		t.Fatalf("no early chunk or no abort counted as a drop: %+v", fin)
	}
	if fin.Rejected != 0 || fin.Pending != 0 {
		t.Fatalf("an abort was taken for a rejection, or something is pending: %+v", fin)
	}

	_, native := d.get(t, "/v1/trace?last=1h&session="+fin.Session)
	gens := readGentrace(t, native)
	var stored, ledger uint64
	for _, g := range gens {
		if g.gotrace > 0 {
			stored++
		}
		ledger += g.dropped + g.evicted + g.rejected
	}
	if fin.Stored != stored || fin.Generations != stored+ledger {
		t.Fatalf("ledger does not add up: %+v; daemon: %d stored, ledger %d", fin, stored, ledger)
	}
	d.stop()
	<-d.logDone
	log := d.log.String()
	if n := strings.Count(log, "generation aborted by the agent"); uint64(n) != fin.Aborts {
		t.Fatalf("daemon logged %d aborts, client sent %d:\n%s", n, fin.Aborts, log)
	}
	if strings.Contains(log, "generation rejected") {
		t.Fatalf("daemon rejected a generation:\n%s", log)
	}
}
