package gentrace

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math/rand"
	"testing"
)

// The body CRC put together from per-chunk CRCs equals the CRC of the
// bytes in one pass, for lengths from 0 to past a chunk and any split.
func TestCRCCombine_equalsOnePass(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, chunkSize+1000)
	rng.Read(buf)
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 63, 64, 1000, 4096, chunkSize, chunkSize + 999} {
		for _, cut := range []int{0, 1, n / 3, n / 2, n} {
			if cut > n {
				continue
			}
			a, b := buf[:cut], buf[cut:n]
			got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
			if want := crc32.Checksum(buf[:n], castagnoli); got != want {
				t.Fatalf("n=%d cut=%d: combined %08x, one pass %08x", n, cut, got, want)
			}
		}
	}
}

// A generation built through the client from bytes written in random
// pieces carries per-chunk CRCs that match its chunks.
func TestData_chunkCRCsFollowTheBytes(t *testing.T) {
	c := &client{cfg: &resolved{}}
	c.sp.limit = 64 << 20
	c.begin(1)
	rng := rand.New(rand.NewSource(2))
	p := make([]byte, 300<<10)
	rng.Read(p)
	for off := 0; off < len(p); {
		n := 1 + rng.Intn(20000)
		if off+n > len(p) {
			n = len(p) - off
		}
		c.data(p[off : off+n])
		off += n
	}
	g := c.cur
	if len(g.chunks) < 4 || len(g.crcs) != len(g.chunks) {
		t.Fatalf("%d chunks, %d crcs", len(g.chunks), len(g.crcs))
	}
	for i, ch := range g.chunks {
		if g.crcs[i] != crc32.Checksum(ch, castagnoli) {
			t.Fatalf("chunk %d: crc %08x, bytes %08x", i, g.crcs[i], crc32.Checksum(ch, castagnoli))
		}
	}
}

func BenchmarkManifest_perGeneration(b *testing.B) {
	chunks := make([][]byte, 200)
	crcs := make([]uint32, len(chunks))
	for i := range chunks {
		chunks[i] = make([]byte, chunkSize)
	}
	clock := clockRecord(&genClock{1, 2, 3, 4})
	for i := 0; i < b.N; i++ {
		computeManifest(chunks, crcs, clock)
	}
}

// syntheticStream is a Go 1.26 trace of one generation: n batches of 64
// KiB of random bytes, and the end-of-generation byte.
func syntheticStream(n int) []byte {
	rng := rand.New(rand.NewSource(3))
	s := []byte("go 1.26 trace\x00\x00\x00")
	payload := make([]byte, maxBatchSize-64)
	for i := 0; i < n; i++ {
		rng.Read(payload)
		s = append(s, evEventBatch)
		for _, v := range []uint64{1, uint64(i % 4), uint64(1000 + i), uint64(len(payload))} {
			s = binary.AppendUvarint(s, v)
		}
		s = append(s, payload...)
	}
	return append(s, evEndOfGeneration)
}

// BenchmarkClient_writeSealSendPerByte: the client's own CPU per byte of
// trace outside the network: the runtime's writes (in 64 KiB pieces)
// split and copied into the spool, then the generation framed (manifest
// included) to io.Discard, then acknowledged (its chunks go back to the
// spool for the next pass, as in a running client). A generation of 32
// MiB, as a program tracing at tens of MB/s makes, is out of the cache by
// the time it is sent.
func BenchmarkClient_writeSealSendPerByte(b *testing.B) {
	s := syntheticStream(512)
	b.SetBytes(int64(len(s)))
	bw := bufio.NewWriterSize(io.Discard, 256<<10)
	c := &client{cfg: &resolved{}, wake: make(chan struct{}, 1)}
	c.sp.limit = 256 << 20
	w := writer{c}
	for i := 0; i <= b.N; i++ {
		if i == 1 { // the first pass mapped the chunks; the spool reuses them
			b.ResetTimer()
		}
		c.split = newSplitter(c)
		c.sp.lastNum = 0
		for off := 0; off < len(s); off += 64 << 10 {
			end := off + 64<<10
			if end > len(s) {
				end = len(s)
			}
			w.Write(s[off:end])
		}
		if len(c.sp.gens) != 1 {
			b.Fatalf("%d generations", len(c.sp.gens))
		}
		if err := writeGen(bw, io.Discard, c.sp.gens[0], 0); err != nil {
			b.Fatal(err)
		}
		c.sp.ack(1)
	}
}
