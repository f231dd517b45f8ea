package gentrace

// spool.go: finished Go generations held until the daemon ACKs them, within
// a byte budget, and the loss ledger.
//
// States of a generation: queued -> sent (its frames are being written or
// were written on the live connection) -> freed on ACK or rejection; a lost
// connection puts every sent one back to queued (requeue).
//
// The ledger counts whole Go generations: dropped (the client could not
// spool it: the budget was full of generations it may not evict, or the
// generation alone was too big), evicted (pushed out of the spool by a newer
// one), rejected (refused by the daemon).
//
// Invariants (all under client.mu):
//  1. A generation's ledger is fixed at its first transmission and never
//     changes, so a resend carries the same GEN_END the daemon may hold.
//  2. The Go generations lost and the ledger of a generation that leaves
//     without being stored (evicted, rejected) are carried exactly once into
//     the ledger of the next generation sent: written = stored + ledger.
//  3. Only a queued generation that cannot be stored on the daemon already
//     (maybeStored false) is evicted; a sent one never is, and one whose
//     GEN_END went out on a lost connection waits for the next WELCOME to
//     say whether it was committed. Otherwise one generation could count
//     as both stored and evicted.
//  4. bytes (the memory of queued and sent generations and of the one
//     being built, chunk capacities) plus the free chunks kept for reuse
//     stays <= limit.

import "sync"

const (
	gQueued = iota
	gSent
)

type genClock struct{ startMono, startReal, endMono, endReal uint64 }

type goGen struct {
	num        uint64
	chunks     [][]byte
	crcs       []uint32 // CRC-32C of each chunk, kept as it is filled
	size       int      // Go bytes
	mem        int      // chunk capacities: what the spool counts
	clock      genClock
	ledgerOnly bool // no Go bytes: carries a ledger nothing else could

	state       int
	early       int  // chunks written early on the live connection (early.go)
	sending     bool // the sender is writing chunks of it early now (early.go)
	gone        bool // dropped while being built: none of it is sent any more
	maybeStored bool // GEN_END written on some connection (invariant 3)
	ledgerSet   bool
	dropped     uint64
	evicted     uint64
	rejected    uint64
}

type spool struct {
	limit    int
	gens     []*goGen // oldest first
	bytes    int      // spooled + building (invariant 4)
	building int

	pendDropped, pendEvicted, pendRejected uint64

	// Chunks of generations that left, for the next ones: at tens of MB
	// of trace a second, allocating them anew would make the garbage
	// collector run (and assist) in the traced program many times a second.
	// They count toward the limit too: bytes + len(free)*chunkSize <= limit.
	free [][]byte

	allocated uint64 // full-size chunks made (not reused), for the tests

	// Counters, in Go generations.
	written, stored, dropped, evicted, rejected uint64
	lastNum                                     uint64 // highest generation number spooled or dropped
}

// evictOne pushes out the oldest evictable generation (invariant 3).
func (sp *spool) evictOne() bool {
	for i, g := range sp.gens {
		if g.state != gQueued || g.maybeStored || g.early > 0 || g.sending {
			continue // early > 0, sending: open on the daemon (early.go 4)
		}
		sp.gens = append(sp.gens[:i], sp.gens[i+1:]...)
		sp.bytes -= g.mem
		sp.leave(g)
		sp.recycle(g.chunks)
		g.chunks = nil
		if !g.ledgerOnly {
			sp.pendEvicted++
			sp.evicted++
		}
		return true
	}
	return false
}

// leave carries the ledger of a generation that will never be stored
// (invariant 2).
func (sp *spool) leave(g *goGen) {
	if g.ledgerSet {
		sp.pendDropped += g.dropped
		sp.pendEvicted += g.evicted
		sp.pendRejected += g.rejected
	}
}

// reserve makes room for n more bytes of the generation being built;
// false: it cannot be spooled.
//
// A full-size chunk is taken from the free list when it has one (chunk()):
// that chunk only moves from free to bytes, so it is not trimmed with the
// others. (Trimming it too threw one reusable chunk away for every chunk
// taken once the spool was near its limit, as at 28 MB/s of trace with the
// default 64 MiB, and the program allocated new ones: the garbage collector
// ran for it.)
func (sp *spool) reserve(n int) bool {
	if sp.building+n > sp.limit {
		return false // could never fit: evict nothing for it
	}
	for {
		keep := 0
		if n == chunkSize && len(sp.free) > 0 {
			keep = 1
		}
		over := func() bool { return sp.bytes+n+(len(sp.free)-keep)*chunkSize > sp.limit }
		for over() && len(sp.free) > keep {
			sp.free = sp.free[:len(sp.free)-1] // free chunks go before generations
		}
		if !over() {
			break
		}
		if !sp.evictOne() {
			return false
		}
	}
	sp.bytes += n
	sp.building += n
	return true
}

// abandon gives back the bytes of a generation that is being dropped.
func (sp *spool) abandon() {
	sp.bytes -= sp.building
	sp.building = 0
}

// chunk returns an empty chunk, reused if one is free.
func (sp *spool) chunk() []byte {
	if n := len(sp.free); n > 0 {
		c := sp.free[n-1]
		sp.free = sp.free[:n-1]
		return c[:0]
	}
	if c, ok := chunkPool.Get().(*[chunkSize]byte); ok {
		return c[:0:chunkSize]
	}
	sp.allocated++
	return make([]byte, 0, chunkSize)
}

// chunkPool keeps the chunks of a stopped client for the next one, until
// the garbage collector takes them (sync.Pool: two collections without
// use): a program that stops and starts tracing (as the benchmark does in
// every round) does not allocate, zero and collect a new spool each time,
// and one that stops for good holds nothing for long.
var chunkPool sync.Pool

// release hands every full-size chunk to chunkPool once nothing can read
// or write them any more (the sender exited after Stop). Under mu.
func (sp *spool) release() {
	put := func(cs [][]byte) {
		for _, c := range cs {
			if cap(c) == chunkSize {
				chunkPool.Put((*[chunkSize]byte)(c[:chunkSize]))
			}
		}
	}
	put(sp.free)
	sp.free = nil
	for _, g := range sp.gens {
		put(g.chunks)
		g.chunks = nil
	}
}

// recycle keeps the chunks of a generation that left (its bytes already
// given back) within the limit (invariant 4). Only generations nobody
// writes from any more: the sender handles ACKs and rejections between
// generations, and evicts only queued ones.
func (sp *spool) recycle(chunks [][]byte) {
	for _, c := range chunks {
		if cap(c) != chunkSize {
			// A generation's first chunks are smaller (16, 32, 64 KiB):
			// skip them, not the full ones after them (stopping here kept
			// no chunk at all, and every chunk was allocated anew).
			continue
		}
		if sp.bytes+(len(sp.free)+1)*chunkSize > sp.limit {
			return
		}
		sp.free = append(sp.free, c[:0])
	}
}

func (sp *spool) add(g *goGen) {
	sp.building = 0 // its bytes were reserved while it was built
	sp.gens = append(sp.gens, g)
}

// next returns the oldest queued generation, marked sent, its ledger fixed
// on its first transmission (invariant 1).
func (sp *spool) next() *goGen {
	for _, g := range sp.gens {
		if g.state != gQueued {
			continue
		}
		g.state = gSent
		if !g.ledgerSet {
			g.ledgerSet = true
			g.dropped, g.evicted, g.rejected = sp.pendDropped, sp.pendEvicted, sp.pendRejected
			sp.pendDropped, sp.pendEvicted, sp.pendRejected = 0, 0, 0
		}
		return g
	}
	return nil
}

func (sp *spool) find(num uint64) int {
	for i, g := range sp.gens {
		if g.num == num {
			return i
		}
	}
	return -1
}

func (sp *spool) remove(i int) *goGen {
	g := sp.gens[i]
	sp.gens = append(sp.gens[:i], sp.gens[i+1:]...)
	sp.bytes -= g.mem
	sp.recycle(g.chunks)
	g.chunks = nil
	return g
}

// ack: the daemon stored num (or already had it).
func (sp *spool) ack(num uint64) {
	if i := sp.find(num); i >= 0 {
		if g := sp.remove(i); !g.ledgerOnly {
			sp.stored++
		}
	}
}

// reject: the daemon refused num for good; never resent.
func (sp *spool) reject(num uint64) {
	if i := sp.find(num); i >= 0 {
		g := sp.remove(i)
		sp.leave(g)
		if !g.ledgerOnly {
			sp.pendRejected++
			sp.rejected++
		}
	}
}

// requeue: the connection is gone; everything sent goes back to queued.
func (sp *spool) requeue() {
	for _, g := range sp.gens {
		g.state = gQueued
		g.early = 0
	}
}

// welcome applies the resume hint: a generation whose GEN_END went out on
// an earlier connection and that is <= last_gen was committed or rejected
// (a daemon commits a session's generations in GEN_END order); counted as
// stored, it is not resent. Others can no longer be on the daemon.
func (sp *spool) welcome(hasLast bool, last uint64) {
	for i := 0; i < len(sp.gens); {
		g := sp.gens[i]
		if g.maybeStored && hasLast && g.num <= last {
			sp.remove(i)
			if !g.ledgerOnly {
				sp.stored++
			}
			continue
		}
		g.maybeStored = false
		i++
	}
}

// pending: generations not yet resolved, and ledger counts that still need
// a generation to travel in.
func (sp *spool) pending() (gens int, ledger bool) {
	return len(sp.gens), sp.pendDropped+sp.pendEvicted+sp.pendRejected != 0
}
