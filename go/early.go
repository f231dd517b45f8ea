package gentrace

// early.go: the generation being built is sent as its chunks fill, not
// held until the runtime ends it.
//
// A Go generation lasts about a second; at tens of MB/s of trace holding it
// whole meant the socket write read each chunk back from memory a second
// after the copy had put it in the cache, and the daemon got a generation's
// bytes in one burst. Now the sender writes every full chunk of the open
// generation (c.cur) as a BATCH frame as soon as all older generations are
// out, and at seal only the last chunk, the CLOCK record and GEN_END are
// left. The chunks stay in the spool until the ACK, as before: a
// generation cut off by a lost connection is resent from its first byte
// (PROTOCOL.md section 7), so nothing changes for resume or the ledger.
//
// Batches. The writer wakes the sender only once c.earlyChunks full chunks
// (1 MiB of full-size ones, fewer for a small spool: earlyBatch) wait, and
// the sender writes them all in one writev (writeChunks), with the next
// frames: at 100 MB/s of trace that is about 100 wake-ups and system calls
// a second instead of 800. The last chunks of a generation go at its seal,
// so a quiet program's bytes wait at most the generation (about a second),
// as before early chunks.
//
// Abort. A generation may still be dropped after some of its chunks went
// out (it grew over its share of the spool or over max_gen_bytes, there was
// no room, or the trace stream broke): the daemon then holds it open. The
// sender ends it with an abort GEN_END (PROTOCOL.md 3.4: records = bytes = 0
// and crc = 0, a manifest no generation has, as each has a CLOCK record),
// which the daemon discards without storing or counting anything (a daemon
// that predates aborts answers it ERROR(MANIFEST, gen), which the client
// ignores, as it holds no such generation). The drop itself is counted as
// every drop is, so the ledger stays exact.
//
// Invariants (under client.mu unless said):
//  1. g.early counts the chunks of g written on the live connection; every
//     one of them is full (immutable until g leaves the spool), so the
//     writer never changes a byte the sender reads. On a lost connection it
//     goes back to 0 (requeue), like every partly sent generation.
//  2. Only the newest generation is sent early, and only when every sealed
//     one was sent whole on this connection: a generation's frames follow
//     its predecessor's GEN_END, so at most two are open on the daemon.
//  3. A generation with early > 0, or whose chunks the sender is writing
//     now (g.sending), that is dropped gets exactly one abort on that
//     connection (c.aborts), sent before anything else; its chunks are not
//     recycled while the sender may still read them. A lost connection
//     clears c.aborts: the daemon dropped the open generation with it.
//  4. A sealed generation with early > 0 or g.sending is never evicted (it
//     is open on the daemon, and its chunks may be being read; spool
//     invariant 3).
//  5. What the sender wrote early counts in g.early unless g was dropped
//     (g.gone), also when the runtime sealed g meanwhile: the sealed
//     generation is then sent on from the first chunk not yet written.
//     (Counting it only while g was still c.cur made the sender write
//     those chunks a second time after a seal that came during the write,
//     and the daemon rejected the generation for its CRC.)

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
)

// earlyMaxChunks: the full chunks (1 MiB) that wake the sender, at most.
const earlyMaxChunks = 8

// earlyBatch is c.earlyChunks for a spool of spool bytes: 1 MiB, or an
// eighth of the spool when that is less (a generation may use half of it,
// and should still go early in a few batches), at least one chunk.
func earlyBatch(spool int) int {
	return min(earlyMaxChunks, max(1, spool/8/chunkSize))
}

// abortManifest: the manifest of an abort GEN_END.
var abortManifest = manifest{}

// abortSent queues the abort of g if the daemon may hold part of it
// (invariant 3). g is being dropped by the caller.
func (c *client) abortSent(g *goGen) {
	g.gone = true
	if g.early > 0 || g.sending {
		c.aborts = append(c.aborts, g.num)
		c.earlyAborts++
		c.poke()
	}
	g.early = 0
}

// earlyWork returns the full chunks of the open generation not yet sent
// on this connection, marking the sender busy with them; nil if there are
// fewer than c.earlyChunks or the generation may not go early. Under mu, only when no sealed
// generation is left to send (invariant 2).
func (c *client) earlyWork() (g *goGen, chunks [][]byte) {
	g = c.cur
	if g == nil || c.dropping || c.skipping || c.cfg.flight != nil {
		return nil, nil
	}
	full := len(g.chunks)
	if full > 0 && len(g.chunks[full-1]) < cap(g.chunks[full-1]) {
		full--
	}
	if full-g.early < max(1, c.earlyChunks) {
		return nil, nil
	}
	g.sending = true
	return g, g.chunks[g.early:full:full]
}

// earlyDone records what the sender wrote of g, whether g is still being
// built or was sealed meanwhile (invariant 5), or nothing when g was
// dropped meanwhile (its abort is queued) or the write failed (the
// connection is gone: requeue). Under mu.
func (c *client) earlyDone(g *goGen, n int, ok bool) {
	g.sending = false
	if g.gone || !ok {
		return
	}
	g.early += n
	c.earlySent += uint64(n)
}

// sendAborts writes the queued aborts. Called by the sender without mu;
// the list is taken under mu.
func (c *client) sendAborts(bw *bufio.Writer) error {
	c.mu.Lock()
	nums := c.aborts
	c.aborts = nil
	c.mu.Unlock()
	for _, num := range nums {
		if err := writeFrame(bw, frGenEnd, genEndPayload(num, abortManifest, 0, 0, 0)); err != nil {
			return err
		}
	}
	if len(nums) == 0 {
		return nil
	}
	return bw.Flush()
}

// writeChunks sends chunks as GOTRACE records, one BATCH frame each, and
// then tail (frames already encoded, e.g. CLOCK and GEN_END): all of it in
// one writev, the chunks from where they lie rather than copied through
// the buffer (at tens of MB/s the copy shows), so the kernel is entered
// once per batch of chunks, not once per chunk.
func writeChunks(bw *bufio.Writer, conn io.Writer, num uint64, chunks [][]byte, tail []byte) error {
	if isTLS(conn) {
		// Through the buffer: header and chunk share full records (a
		// writev would not reach the socket as one anyway).
		var hdr [maxChunkHdr]byte
		for _, ch := range chunks {
			if _, err := bw.Write(chunkHdr(hdr[:0], num, len(ch))); err != nil {
				return err
			}
			if _, err := bw.Write(ch); err != nil {
				return err
			}
		}
		_, err := bw.Write(tail)
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	hdrs := make([]byte, 0, len(chunks)*maxChunkHdr)
	bufs := make(net.Buffers, 0, 2*len(chunks)+1)
	for _, ch := range chunks {
		at := len(hdrs)
		hdrs = chunkHdr(hdrs, num, len(ch))
		bufs = append(bufs, hdrs[at:len(hdrs):len(hdrs)], ch)
	}
	if len(tail) > 0 {
		bufs = append(bufs, tail)
	}
	_, err := bufs.WriteTo(conn)
	return err
}

// maxChunkHdr bounds chunkHdr's bytes: frame header, gen and record
// header (two uvarints).
const maxChunkHdr = 5 + 2*binary.MaxVarintLen64 + 1

// chunkHdr appends the BATCH frame header, gen and GOTRACE record header
// of a chunk of n bytes.
func chunkHdr(b []byte, num uint64, n int) []byte {
	var g [binary.MaxVarintLen64]byte
	var r [binary.MaxVarintLen64 + 1]byte
	gen, rec := binaryGen(g[:0], num), recHeader(r[:0], recGoTrace, n)
	size := len(gen) + len(rec) + n
	b = append(b, byte(size), byte(size>>8), byte(size>>16), byte(size>>24), frBatch)
	return append(append(b, gen...), rec...)
}
