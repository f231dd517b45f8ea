package gentrace

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand"
	"runtime/trace"
	"testing"
	"time"
)

// recordTrace writes a real trace of this process with several
// generations (the runtime starts one every second).
func recordTrace(t *testing.T, d time.Duration) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		ctx, task := trace.NewTask(context.Background(), "t")
		trace.WithRegion(ctx, "r", func() { trace.Logf(ctx, "k", "%d", i) })
		task.End()
		time.Sleep(time.Millisecond)
	}
	trace.Stop()
	return buf.Bytes()
}

type collect struct {
	minor int
	gens  []uint64
	data  [][]byte
	open  bool
	infos []genInfo
}

func (c *collect) header(m int) { c.minor = m }
func (c *collect) begin(g uint64) {
	c.gens = append(c.gens, g)
	c.data = append(c.data, nil)
	c.open = true
}
func (c *collect) data2(p []byte) { c.data[len(c.data)-1] = append(c.data[len(c.data)-1], p...) }
func (c *collect) seal(i genInfo) { c.open = false; c.infos = append(c.infos, i) }

type collectSink struct{ *collect }

func (s collectSink) data(p []byte) { s.data2(p) }

// batchGens walks one generation's bytes and returns the generation of
// every batch, failing on anything that is not whole batches.
func batchGens(t *testing.T, minor int, p []byte) []uint64 {
	var out []uint64
	for len(p) > 0 {
		if p[0] == evEndOfGeneration && minor >= 26 {
			if len(p) != 1 {
				t.Fatalf("end-of-generation marker not last")
			}
			return out
		}
		off := 1
		if p[0] == evExperimentalBatch {
			off = 2
		} else if p[0] != evEventBatch {
			t.Fatalf("not a batch: %d", p[0])
		}
		var v [4]uint64
		for i := range v {
			x, n := binary.Uvarint(p[off:])
			if n <= 0 {
				t.Fatal("bad varint")
			}
			v[i] = x
			off += n
		}
		out = append(out, v[0])
		p = p[off+int(v[3]):]
	}
	if minor >= 26 {
		t.Fatal("Go 1.26+ generation without its end marker")
	}
	return out
}

func TestSplit_realTraceInRandomPiecesKeepsEveryByte(t *testing.T) {
	t0 := time.Now()
	tr := recordTrace(t, 2500*time.Millisecond)
	t1 := time.Now()
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 4; round++ {
		c := &collect{}
		s := newSplitter(collectSink{c})
		for p := tr; len(p) > 0; {
			n := 1 + rng.Intn(100)
			if round == 0 {
				n = 1 // one byte at a time
			}
			if round == 3 {
				n = len(p) // all at once
			}
			if n > len(p) {
				n = len(p)
			}
			s.write(p[:n])
			p = p[n:]
		}
		s.finish()
		if s.err != nil {
			t.Fatal(s.err)
		}
		if c.open {
			t.Fatal("a generation left open")
		}
		if len(c.gens) < 3 {
			t.Fatalf("%d generations in 2.5 s, want at least 3", len(c.gens))
		}
		if want, _ := parseGoHeader(tr[:16]); c.minor != want {
			t.Fatalf("minor %d, want %d", c.minor, want)
		}
		// Go 1.25+: every generation's edges come from its clock
		// snapshot, inside the recording (a second of slack for batches
		// flushed late), in order, each about a second long.
		if c.minor >= 25 {
			for i, info := range c.infos {
				e, ok := info.edges()
				if !ok {
					t.Fatalf("generation %d: no clock snapshot (%+v)", c.gens[i], info)
				}
				lo, hi := uint64(t0.Add(-time.Second).UnixNano()), uint64(t1.Add(time.Second).UnixNano())
				if e.startReal < lo || e.endReal > hi || e.endReal < e.startReal || e.endMono-e.startMono > uint64(3*time.Second) {
					t.Fatalf("generation %d: edges %+v outside the recording [%d, %d]", c.gens[i], e, lo, hi)
				}
				if i > 0 {
					p, _ := c.infos[i-1].edges()
					if e.startReal < p.startReal {
						t.Fatalf("generation %d starts before the previous one", c.gens[i])
					}
				}
			}
		}
		var all []byte
		for i, d := range c.data {
			if i > 0 && c.gens[i] <= c.gens[i-1] {
				t.Fatalf("generations %v not increasing", c.gens)
			}
			for _, g := range batchGens(t, c.minor, d) {
				if g != c.gens[i] {
					t.Fatalf("batch of gen %d inside gen %d", g, c.gens[i])
				}
			}
			all = append(all, d...)
		}
		if !bytes.Equal(all, tr[16:]) {
			t.Fatalf("round %d: concatenated generations differ from the stream (%d vs %d bytes)", round, len(all), len(tr)-16)
		}
	}
}

func TestSplit_hostileBytesNeverPanicAndStop(t *testing.T) {
	tr := recordTrace(t, 300*time.Millisecond)
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 2000; i++ {
		b := append([]byte(nil), tr...)
		for k := 0; k < 1+rng.Intn(8); k++ {
			b[16+rng.Intn(len(b)-16)] = byte(rng.Intn(256))
		}
		if rng.Intn(4) == 0 {
			b = b[:16+rng.Intn(len(b)-16)]
		}
		c := &collect{}
		s := newSplitter(collectSink{c})
		s.write(b)
		s.finish()
		if s.err == nil {
			continue
		}
		// After an error nothing more is passed on.
		n := len(c.data)
		s.write(tr[16:])
		if len(c.data) != n {
			t.Fatal("splitter went on after an error")
		}
	}
	for _, h := range []string{"go 1.21 trace\x00\x00\x00", "go 1.2x trace\x00\x00\x00", "gentrace\x01\x00\x00\x00\x00\x00\x00\x00", "go 1.23 trace\x00\x00x"} {
		s := newSplitter(collectSink{&collect{}})
		s.write([]byte(h))
		if s.err == nil {
			t.Fatalf("header %q accepted", h)
		}
	}
}
