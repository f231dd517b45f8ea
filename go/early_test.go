package gentrace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

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

// A drop while the sender is writing the generation's chunks (g.sending)
// aborts it too, and leaves its chunks alone for the sender; earlyDone
// then records nothing for it.
func TestEarly_dropWhileSendingAbortsAndKeepsChunks(t *testing.T) {
	c := newTestClient(1 << 20)
	c.begin(1)
	c.data(make([]byte, firstChunkSize*(1+2+4)+chunkSize)) // 16, 32, 64, 128 KiB
	g, chunks := c.earlyWork()
	if len(chunks) != 4 || cap(chunks[3]) != chunkSize || !g.sending {
		t.Fatalf("early work: %d chunks", len(chunks))
	}
	free := len(c.sp.free)
	c.data(make([]byte, 1<<20)) // over half: dropped meanwhile
	if len(c.aborts) != 1 || len(c.sp.free) != free {
		t.Fatalf("aborts %v; free %d -> %d", c.aborts, free, len(c.sp.free))
	}
	c.earlyDone(g, len(chunks), true)
	if g.early != 0 || c.earlySent != 0 || g.sending {
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

// received is what the daemon gets of generation num on wire (its BATCH
// records in order) and the manifest of its GEN_END; fails the test if
// the records do not match that manifest, as the daemon would reject it.
func received(t *testing.T, wire []byte, num uint64) (body []byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(wire))
	for {
		f, err := readFrame(br)
		if err != nil {
			t.Fatalf("no GEN_END for generation %d: %v", num, err)
		}
		d := dec{p: f.payload}
		if d.uv() != num {
			continue
		}
		switch f.typ {
		case frBatch:
			body = append(body, d.p...)
		case frGenEnd:
			records, _, n := d.uv(), d.uv(), d.uv()
			crc := binary.LittleEndian.Uint32(d.p)
			if n != uint64(len(body)) || crc != crc32.Checksum(body, castagnoli) {
				t.Fatalf("generation %d: %d bytes with CRC %08x received, GEN_END says %d records, %d bytes, CRC %08x",
					num, len(body), crc32.Checksum(body, castagnoli), records, n, crc)
			}
			return body
		}
	}
}

// goBytes: the payloads of the GOTRACE records of a received body.
func goBytes(t *testing.T, body []byte) (out []byte) {
	t.Helper()
	for len(body) > 0 {
		typ := body[0]
		n, k := binary.Uvarint(body[1:])
		if k <= 0 || uint64(len(body)-1-k) < n {
			t.Fatalf("bad record in the body")
		}
		if typ == recGoTrace {
			out = append(out, body[1+k:1+k+int(n)]...)
		}
		body = body[1+k+int(n):]
	}
	return out
}

func testBytes(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

// The runtime ends a generation while the sender writes its full chunks
// early: those chunks went out, so the sealed generation goes on from
// after them. (Counting nothing for a generation no longer c.cur sent
// them again at seal: the daemon got them twice and rejected the
// generation for its CRC, as tests/go's early test saw under -race.)
func TestEarly_sealWhileSendingSendsEachChunkOnce(t *testing.T) {
	c := newTestClient(4 << 20)
	c.begin(1)
	p := testBytes(firstChunkSize*3 + 1000) // chunks 0, 1 full; 2 started
	c.data(p)
	g, chunks := c.earlyWork()
	if len(chunks) != 2 {
		t.Fatalf("early work: %d chunks", len(chunks))
	}
	var wire bytes.Buffer
	bw := bufio.NewWriter(&wire)
	if err := writeChunks(bw, &wire, g.num, chunks, nil); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	c.seal(genInfo{}) // while the sender was writing
	c.begin(2)
	c.earlyDone(g, len(chunks), true)
	n := c.sp.next()
	if n != g {
		t.Fatalf("next %v", n)
	}
	if err := writeGen(bw, &wire, n, n.early); err != nil {
		t.Fatal(err)
	}
	if got := goBytes(t, received(t, wire.Bytes(), 1)); !bytes.Equal(got, p) {
		t.Fatalf("received %d Go bytes, wrote %d", len(got), len(p))
	}
	if c.earlySent != 2 {
		t.Fatalf("early chunks counted %d", c.earlySent)
	}
}

// A generation sealed while the sender writes its chunks early is open on
// the daemon and its chunks are being read: the next generation growing
// does not evict it (its chunks would be reused under the sender) but is
// dropped itself when there is no other room.
func TestEarly_sealedWhileSendingIsNotEvicted(t *testing.T) {
	c := newTestClient(1 << 20)
	c.begin(1)
	p := testBytes(500 << 10) // 16+32+64+4x128 KiB of chunks
	c.data(p)
	g, chunks := c.earlyWork()
	if len(chunks) != 6 {
		t.Fatalf("early work: %d chunks", len(chunks))
	}
	c.seal(genInfo{})
	c.begin(2)
	c.data(testBytes(450 << 10)) // needs more room than is left
	if c.sp.evicted != 0 || c.sp.find(1) < 0 {
		t.Fatalf("generation 1 evicted while its chunks were being sent")
	}
	if !c.dropping {
		t.Fatal("generation 2 took room it did not have")
	}
	for i, ch := range chunks {
		if !bytes.Equal(ch, p[:len(ch)]) {
			t.Fatalf("chunk %d changed under the sender", i)
		}
		p = p[len(ch):]
	}
	c.earlyDone(g, len(chunks), true)
	if g.early != 6 {
		t.Fatalf("early %d", g.early)
	}
}

// The sender is woken for early chunks once a batch of them is full (1 MiB
// with the default spool), not for every chunk, and takes the whole batch.
func TestEarly_fullChunksWaitForABatch(t *testing.T) {
	if earlyBatch(64<<20) != 8 || earlyBatch(8<<20) != 8 || earlyBatch(4<<20) != 4 || earlyBatch(1<<20) != 1 {
		t.Fatalf("earlyBatch: %d %d %d %d", earlyBatch(64<<20), earlyBatch(8<<20), earlyBatch(4<<20), earlyBatch(1<<20))
	}
	c := newTestClient(64 << 20)
	c.earlyChunks = earlyBatch(c.sp.limit)
	c.begin(1)
	// 16 + 32 + 64 KiB, then 128 KiB chunks: 7 full ones and one started.
	c.data(make([]byte, firstChunkSize*(1+2+4)+4*chunkSize+1))
	if len(c.wake) != 0 {
		t.Fatal("the sender was woken for fewer than a batch of chunks")
	}
	if g, _ := c.earlyWork(); g != nil {
		t.Fatal("fewer than a batch of chunks went early")
	}
	c.data(make([]byte, chunkSize)) // the eighth is full
	if len(c.wake) != 1 {
		t.Fatal("a full batch did not wake the sender")
	}
	g, chunks := c.earlyWork()
	if g == nil || len(chunks) != 8 {
		t.Fatalf("early work: %d chunks", len(chunks))
	}
	c.earlyDone(g, len(chunks), true)
	if g.early != 8 {
		t.Fatalf("early %d", g.early)
	}
}
