package gentrace

import (
	"encoding/binary"
	"testing"
)

func gen(num uint64, size int) *goGen { return &goGen{num: num, size: size, mem: size} }

// add builds a generation of size bytes the way the sink does.
func addGen(sp *spool, num uint64, size int) bool {
	if !sp.reserve(size) {
		sp.abandon()
		sp.dropped++
		sp.pendDropped++
		return false
	}
	sp.add(gen(num, size))
	return true
}

func TestSpool_ledgerAddsUpAcrossEvictRejectAndResend(t *testing.T) {
	sp := &spool{limit: 300}
	written := uint64(0)
	for n := uint64(1); n <= 3; n++ {
		addGen(sp, n, 100)
		written++
	}
	g := sp.next() // gen 1 sent: ledger fixed (all zero)
	if g.num != 1 || g.dropped+g.evicted+g.rejected != 0 {
		t.Fatalf("%+v", g)
	}
	// A fourth does not fit: 1 is sent (not evictable), so 2 is evicted.
	addGen(sp, 4, 100)
	written++
	if sp.evicted != 1 || sp.find(2) >= 0 {
		t.Fatalf("evicted %d", sp.evicted)
	}
	// One bigger than the whole spool is dropped.
	addGen(sp, 5, 400)
	written++
	if sp.dropped != 1 {
		t.Fatal("not dropped")
	}
	g3 := sp.next()
	if g3.num != 3 || g3.evicted != 1 || g3.dropped != 1 {
		t.Fatalf("gen 3 ledger %+v", g3)
	}
	// The daemon rejects 3: its events and its ledger travel on with 4.
	sp.reject(3)
	sp.ack(1)
	g4 := sp.next()
	if g4.num != 4 || g4.rejected != 1 || g4.evicted != 1 || g4.dropped != 1 {
		t.Fatalf("gen 4 ledger %+v", g4)
	}
	// Connection lost after GEN_END of 4: requeued, maybe stored; a
	// WELCOME with last_gen 4 resolves it as stored, not resent.
	g4.maybeStored = true
	sp.requeue()
	if sp.evictOne() {
		t.Fatal("evicted a generation the daemon may hold")
	}
	sp.welcome(true, 4)
	if n, ledger := sp.pending(); n != 0 || ledger {
		t.Fatalf("pending %d %v", n, ledger)
	}
	// written = stored + ledger carried by stored generations
	stored := sp.stored
	ledger := g4.dropped + g4.evicted + g4.rejected
	if written != stored+ledger || stored != 2 {
		t.Fatalf("written %d stored %d ledger %d", written, stored, ledger)
	}
	if sp.bytes != 0 {
		t.Fatalf("%d bytes left", sp.bytes)
	}
}

func TestSpool_welcomeWithoutLastResendsEverything(t *testing.T) {
	sp := &spool{limit: 1000}
	addGen(sp, 1, 10)
	g := sp.next()
	g.maybeStored = true
	sp.requeue()
	sp.welcome(false, 0) // a daemon that lost its database
	if sp.find(1) < 0 || g.maybeStored {
		t.Fatal("generation not kept for resend")
	}
	if sp.next() != g || !g.ledgerSet {
		t.Fatal("not resent")
	}
}

// synthStream: a Go 1.26 stream of n generations, each one batch of
// payload bytes and its end-of-generation byte.
func synthStream(n, payload int) []byte {
	b := []byte("go 1.26 trace\x00\x00\x00")
	for g := 1; g <= n; g++ {
		b = append(b, evEventBatch)
		b = binary.AppendUvarint(b, uint64(g)) // gen
		b = append(b, 1)                       // M
		b = binary.AppendUvarint(b, uint64(g)) // timestamp
		b = binary.AppendUvarint(b, uint64(payload))
		b = append(b, make([]byte, payload)...)
		b = append(b, evEndOfGeneration)
	}
	return b
}

// The spool bounds memory, not Go bytes: many small generations (a quiet
// program with the daemon away) never hold more than the limit in chunks.
func TestSpool_manySmallGenerationsStayWithinTheLimitInMemory(t *testing.T) {
	const limit = 1 << 20
	c := &client{cfg: &resolved{}, wake: make(chan struct{}, 1)}
	c.sp.limit = limit
	c.split = newSplitter(c)
	w := writer{c}
	w.Write(synthStream(200, 3000))
	mem := len(c.sp.free) * chunkSize
	for _, g := range c.sp.gens {
		for _, ch := range g.chunks {
			mem += cap(ch)
		}
	}
	if mem > limit || c.sp.bytes > limit {
		t.Fatalf("spool holds %d bytes of chunks (counted %d), limit %d", mem, c.sp.bytes, limit)
	}
	if c.sp.written != 200 || c.sp.written != uint64(len(c.sp.gens))+c.sp.evicted+c.sp.dropped {
		t.Fatalf("written %d, spooled %d, evicted %d, dropped %d", c.sp.written, len(c.sp.gens), c.sp.evicted, c.sp.dropped)
	}
	if c.sp.evicted == 0 {
		t.Fatal("nothing evicted: the test did not fill the spool")
	}
	// A generation bigger than half the spool is dropped, having pushed out
	// at most half of it.
	c.split = newSplitter(c)
	c.sp.lastNum = 0
	big := []byte("go 1.26 trace\x00\x00\x00")
	for i := 0; i < 20; i++ {
		big = append(big, evEventBatch, 0xe9, 0x01, 1, 1) // gen 233, 64 KiB batches
		big = binary.AppendUvarint(big, 64<<10)
		big = append(big, make([]byte, 64<<10)...)
	}
	big = append(big, evEndOfGeneration)
	before := len(c.sp.gens)
	w.Write(big)
	if c.sp.dropped != 1 || len(c.sp.gens) < before/2-1 || c.sp.bytes > limit {
		t.Fatalf("big generation: dropped %d, gens %d -> %d, bytes %d", c.sp.dropped, before, len(c.sp.gens), c.sp.bytes)
	}
}

// A program tracing fast enough that two generations nearly fill the spool
// (the acknowledged one's chunks come back while the next is built) reuses
// its chunks: after the first generations no new full-size chunk is made.
func TestSpool_nearTheLimitAckedChunksAreReused(t *testing.T) {
	c := &client{cfg: &resolved{}, wake: make(chan struct{}, 1)}
	c.sp.limit = 12 * chunkSize
	w := writer{c}
	const payload = 5*chunkSize + 1000 // 16+32+64 KiB chunks, then full ones
	gen := func(num uint64) []byte {
		b := []byte{evEventBatch}
		b = binary.AppendUvarint(b, num)
		b = append(b, 1)
		b = binary.AppendUvarint(b, num)
		b = binary.AppendUvarint(b, 60000)
		b = append(b, make([]byte, 60000)...)
		for n := 60000; n < payload; n += 60000 {
			b = append(b, evEventBatch)
			b = binary.AppendUvarint(b, num)
			b = append(b, 1)
			b = binary.AppendUvarint(b, num)
			b = binary.AppendUvarint(b, 60000)
			b = append(b, make([]byte, 60000)...)
		}
		return append(b, evEndOfGeneration)
	}
	c.split = newSplitter(c)
	w.Write([]byte("go 1.26 trace\x00\x00\x00"))
	var after3 uint64
	for num := uint64(1); num <= 30; num++ {
		b := gen(num)
		w.Write(b[:len(b)/2])
		if num > 1 { // the previous one is acknowledged mid-way
			c.mu.Lock()
			c.sp.ack(num - 1)
			c.mu.Unlock()
		}
		w.Write(b[len(b)/2:])
		if num == 3 {
			after3 = c.sp.allocated
		}
		if c.sp.bytes+len(c.sp.free)*chunkSize > c.sp.limit {
			t.Fatalf("gen %d: %d bytes + %d free chunks over the %d limit", num, c.sp.bytes, len(c.sp.free), c.sp.limit)
		}
	}
	if c.sp.dropped+c.sp.evicted != 0 || c.sp.written != 30 {
		t.Fatalf("written %d dropped %d evicted %d", c.sp.written, c.sp.dropped, c.sp.evicted)
	}
	if c.sp.allocated != after3 {
		t.Fatalf("%d full-size chunks made after the third generation (%d before)", c.sp.allocated-after3, after3)
	}
}
