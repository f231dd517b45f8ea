package gentrace

import "testing"

func newTestClient(limit int) *client {
	c := &client{cfg: &resolved{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.sp.limit = limit
	return c
}

// Full chunks of the open generation go early, never the one being
// filled; a drop after that queues exactly one abort, and a lost
// connection forgets both (the daemon dropped the open generation).
func TestEarly_fullChunksGoEarlyAndADropAbortsOnce(t *testing.T) {
	c := newTestClient(4 << 20)
	c.begin(1)
	c.data(make([]byte, firstChunkSize+100)) // chunk 0 full, chunk 1 started
	g, chunks := c.earlyWork()
	if g != c.cur || len(chunks) != 1 || len(chunks[0]) != firstChunkSize {
		t.Fatalf("early work %v, %d chunks", g, len(chunks))
	}
	c.earlyDone(g, len(chunks), true)
	if g.early != 1 || c.earlySent != 1 {
		t.Fatalf("early %d, sent %d", g.early, c.earlySent)
	}
	if g2, _ := c.earlyWork(); g2 != nil {
		t.Fatal("the chunk being filled went early")
	}
	// Grows past half the spool: dropped, and aborted once.
	c.data(make([]byte, 2<<20))
	if !c.dropping || len(c.aborts) != 1 || c.aborts[0] != 1 || c.earlyAborts != 1 {
		t.Fatalf("dropping %v, aborts %v", c.dropping, c.aborts)
	}
	c.data(make([]byte, 100)) // ignored while dropping: no second abort
	c.seal(genInfo{})
	if len(c.aborts) != 1 || c.sp.dropped != 1 || c.sp.written != 1 {
		t.Fatalf("aborts %v, dropped %d, written %d", c.aborts, c.sp.dropped, c.sp.written)
	}
}

// A drop while the sender is writing the generation's chunks (earlyBusy)
// aborts it too, and leaves its chunks alone for the sender; earlyDone
// then records nothing for it.
func TestEarly_dropWhileSendingAbortsAndKeepsChunks(t *testing.T) {
	c := newTestClient(1 << 20)
	c.begin(1)
	c.data(make([]byte, firstChunkSize*(1+2+4)+chunkSize)) // 16, 32, 64, 128 KiB
	g, chunks := c.earlyWork()
	if len(chunks) != 4 || cap(chunks[3]) != chunkSize || c.earlyBusy != g {
		t.Fatalf("early work: %d chunks", len(chunks))
	}
	free := len(c.sp.free)
	c.data(make([]byte, 1<<20)) // over half: dropped meanwhile
	if len(c.aborts) != 1 || len(c.sp.free) != free {
		t.Fatalf("aborts %v; free %d -> %d", c.aborts, free, len(c.sp.free))
	}
	c.earlyDone(g, len(chunks), true)
	if g.early != 0 || c.earlySent != 0 || c.earlyBusy != nil {
		t.Fatalf("early %d, sent %d", g.early, c.earlySent)
	}
}

// A sealed generation that went partly early is open on the daemon: never
// evicted, and sent on from its first unsent chunk; requeue resets it.
func TestEarly_partlySentGenerationIsNotEvicted(t *testing.T) {
	c := newTestClient(1 << 20)
	c.begin(1)
	c.data(make([]byte, firstChunkSize+1))
	g, chunks := c.earlyWork()
	c.earlyDone(g, len(chunks), true)
	c.seal(genInfo{})
	if c.sp.evictOne() {
		t.Fatal("a partly sent generation was evicted")
	}
	if n := c.sp.next(); n != g || n.early != 1 {
		t.Fatalf("next %v", n)
	}
	c.sp.requeue()
	if g.early != 0 {
		t.Fatal("requeue kept early")
	}
	if !c.sp.evictOne() {
		t.Fatal("a queued generation no longer sent could not be evicted")
	}
}
