package gentrace

// split.go: cuts a Go 1.22+ execution trace stream into generations.
//
// The stream runtime/trace writes is a 16-byte header ("go 1.NN trace" and
// NUL padding) followed by batches. Every batch starts with a header
// (internal/trace/tracev2): EvEventBatch, or EvExperimentalBatch and an
// experiment byte, then the uvarints generation, M, timestamp and size, then
// size bytes. Since Go 1.26 each generation also ends with a lone
// EvEndOfGeneration byte. Before 1.26 a generation ends where a batch of a
// higher generation starts (or at the end of the stream).
//
// The splitter hands the bytes on unchanged, batch headers included, so the
// concatenated bytes of a generation are exactly what the runtime wrote;
// only the file header is kept apart (the daemon writes it for downloads).
// Bytes may arrive split anywhere: a batch header is gathered across writes
// (it is at most 42 bytes), payloads are passed through in place.
//
// The splitter also notes, per generation, the range of its batch
// timestamps and, from Go 1.25 on, the clock snapshot of its sync batch
// (trace time, monotonic and wall clock read together by the runtime), so
// the generation's edges can be given in wall time even when its bytes
// arrive long after (flight-recorder snapshots).
//
// Invariants:
//  1. sink.data is only called between sink.begin and sink.seal, and every
//     byte after the file header reaches exactly one generation.
//  2. Generation numbers handed to begin strictly increase; anything else is
//     a corrupt stream, which stops the splitter (err set, nothing more is
//     passed on).

import (
	"encoding/binary"
	"fmt"
)

// Event types of the batch framing (internal/trace/tracev2, Go 1.26).
const (
	evEventBatch        = 1
	evExperimentalBatch = 49
	evEndOfGeneration   = 52
	evFrequency         = 8
	evSync              = 50
	evClockSnapshot     = 51
	maxBatchSize        = 64 << 10 // tracev2.MaxBatchSize
	goHeaderSize        = 16
)

type splitSink interface {
	header(minor int) // the file header was read: go 1.<minor>
	begin(gen uint64) // a generation starts
	data(p []byte)    // bytes of the current generation (borrowed)
	seal(genInfo)     // the current generation is complete
}

// genInfo is what the splitter learned about a generation's time.
type genInfo struct {
	minTs, maxTs uint64 // batch header timestamps, trace clock units
	haveClock    bool   // a Go 1.25+ clock snapshot was read:
	freq         uint64 // trace clock units per second
	snapTs       uint64 // trace time of the snapshot
	snapMono     uint64 // runtime monotonic ns at that time
	snapWall     uint64 // unix ns at that time
}

// edges maps the generation's first and last batch times to monotonic and
// wall nanoseconds through its clock snapshot.
func (i *genInfo) edges() (c genClock, ok bool) {
	if !i.haveClock || i.freq == 0 || i.maxTs < i.minTs {
		return c, false
	}
	at := func(base, t uint64) uint64 {
		// Signed trace-time offset, scaled in float64 (exact enough for
		// offsets of seconds), added to the base in integers (float64
		// would round a unix time in ns to 256 ns).
		d := float64(int64(t-i.snapTs)) * 1e9 / float64(i.freq)
		return uint64(int64(base) + int64(d))
	}
	c.startMono, c.endMono = at(i.snapMono, i.minTs), at(i.snapMono, i.maxTs)
	c.startReal, c.endReal = at(i.snapWall, i.minTs), at(i.snapWall, i.maxTs)
	if c.endMono < c.startMono {
		c.endMono = c.startMono
	}
	return c, true
}

type splitState int

const (
	spHeader splitState = iota
	spBatchHdr
	spPayload
	spFailed
)

type splitter struct {
	sink    splitSink
	state   splitState
	hdr     [goHeaderSize]byte
	nhdr    int
	minor   int
	bh      [48]byte // batch header gathered so far
	nbh     int
	left    uint64 // payload bytes of the current batch still to pass on
	cur     uint64 // open generation, 0 = none
	last    uint64 // last generation begun
	info    genInfo
	bts     uint64   // current batch's header timestamp
	pb      [64]byte // start of a Go 1.25+ batch payload (sync batches)
	npb     int
	err     error
	written uint64 // bytes consumed, for error offsets
}

func newSplitter(s splitSink) *splitter { return &splitter{sink: s} }

// parseGoHeader returns the minor version of a Go execution trace header
// ("go 1.23 trace\x00\x00\x00").
func parseGoHeader(h []byte) (int, error) {
	if len(h) != goHeaderSize || string(h[:5]) != "go 1." {
		return 0, fmt.Errorf("not a Go execution trace header: %q", h)
	}
	i, minor := 5, 0
	for ; i < len(h) && h[i] >= '0' && h[i] <= '9' && i < 8; i++ {
		minor = minor*10 + int(h[i]-'0')
	}
	if i == 5 || string(h[i:i+6]) != " trace" {
		return 0, fmt.Errorf("not a Go execution trace header: %q", h)
	}
	for _, c := range h[i+6:] {
		if c != 0 {
			return 0, fmt.Errorf("not a Go execution trace header: %q", h)
		}
	}
	if minor < 22 {
		return minor, fmt.Errorf("Go 1.%d trace: only Go 1.22 and later traces have generations", minor)
	}
	return minor, nil
}

func (s *splitter) fail(format string, a ...any) {
	s.err = fmt.Errorf("gentrace: Go trace stream at byte %d: %s", s.written, fmt.Sprintf(format, a...))
	s.state = spFailed
}

// write consumes p. After an error it ignores everything.
func (s *splitter) write(p []byte) {
	for len(p) > 0 {
		switch s.state {
		case spFailed:
			return
		case spHeader:
			n := copy(s.hdr[s.nhdr:], p)
			s.nhdr += n
			p = p[n:]
			s.written += uint64(n)
			if s.nhdr == goHeaderSize {
				minor, err := parseGoHeader(s.hdr[:])
				if err != nil {
					s.err = fmt.Errorf("gentrace: %v", err)
					s.state = spFailed
					return
				}
				s.minor = minor
				s.sink.header(minor)
				s.state = spBatchHdr
			}
		case spPayload:
			n := uint64(len(p))
			if n > s.left {
				n = s.left
			}
			s.sink.data(p[:n])
			if s.minor >= 25 && s.npb < len(s.pb) {
				s.npb += copy(s.pb[s.npb:], p[:n])
			}
			p = p[n:]
			s.left -= n
			s.written += n
			if s.left == 0 {
				s.state = spBatchHdr
				s.syncBatch()
			}
		case spBatchHdr:
			c := p[0]
			p = p[1:]
			s.written++
			if s.nbh == len(s.bh) {
				s.fail("batch header too long")
				return
			}
			s.bh[s.nbh] = c
			s.nbh++
			if s.nbh == 1 && c == evEndOfGeneration && s.minor >= 25 {
				s.endOfGeneration()
				continue
			}
			if c&0x80 == 0 {
				s.tryHeader()
			}
		}
	}
}

func (s *splitter) endOfGeneration() {
	s.nbh = 0
	if s.cur == 0 {
		s.fail("end-of-generation marker outside a generation")
		return
	}
	// Go 1.25 used the marker only inside the runtime; only 1.26+ readers
	// expect it in the bytes.
	if s.minor >= 26 {
		s.sink.data([]byte{evEndOfGeneration})
	}
	s.sealCur()
}

// sealCur hands the open generation's end to the sink.
func (s *splitter) sealCur() {
	s.sink.seal(s.info)
	s.cur = 0
	s.info = genInfo{}
}

// syncBatch reads the clock snapshot of a Go 1.25+ sync batch:
// EvSync, EvFrequency freq, EvClockSnapshot tsDiff mono sec nsec (the
// runtime's traceSyncBatch), tsDiff counted from the batch's timestamp.
// Anything else is left alone: it is only a better time for the edges.
func (s *splitter) syncBatch() {
	b := s.pb[:s.npb]
	s.npb = 0
	if len(b) < 3 || b[0] != evSync || b[1] != evFrequency {
		return
	}
	b = b[2:]
	var v [5]uint64
	for i := range v {
		if i == 1 {
			if len(b) == 0 || b[0] != evClockSnapshot {
				return
			}
			b = b[1:]
		}
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return
		}
		v[i], b = x, b[n:]
	}
	s.info.haveClock = true
	s.info.freq = v[0]
	s.info.snapTs = s.bts + v[1]
	s.info.snapMono = v[2]
	s.info.snapWall = v[3]*1e9 + v[4]
}

// tryHeader parses the gathered batch header if it is complete.
func (s *splitter) tryHeader() {
	b := s.bh[:s.nbh]
	off := 1
	switch b[0] {
	case evEventBatch:
	case evExperimentalBatch:
		if s.minor < 23 {
			s.fail("experimental batch in a Go 1.%d trace", s.minor)
			return
		}
		off = 2
		if len(b) < 2 {
			return
		}
	default:
		s.fail("expected a batch header, got event type %d", b[0])
		return
	}
	var v [4]uint64
	for i := range v {
		if off >= len(b) {
			return // need more bytes
		}
		x, n := binary.Uvarint(b[off:])
		if n == 0 {
			return
		}
		if n < 0 {
			s.fail("bad varint in batch header")
			return
		}
		v[i] = x
		off += n
	}
	if off != len(b) {
		s.fail("batch header parse error")
		return
	}
	gen, ts, size := v[0], v[2], v[3]
	if size > maxBatchSize {
		s.fail("batch of %d bytes over the %d limit", size, maxBatchSize)
		return
	}
	if gen == 0 {
		s.fail("batch of generation 0")
		return
	}
	switch {
	case s.cur == gen:
	case gen > s.cur && gen > s.last:
		if s.cur != 0 {
			s.sealCur()
		}
		s.cur, s.last = gen, gen
		s.info = genInfo{minTs: ts, maxTs: ts}
		s.sink.begin(gen)
	default:
		s.fail("batch of generation %d after generation %d", gen, s.last)
		return
	}
	if ts != 0 && (ts < s.info.minTs || s.info.minTs == 0) {
		s.info.minTs = ts
	}
	if ts > s.info.maxTs {
		s.info.maxTs = ts
	}
	s.bts = ts
	s.npb = 0
	s.sink.data(b)
	s.nbh = 0
	s.left = size
	if size > 0 {
		s.state = spPayload
	}
}

// finish ends the stream: the open generation (a pre-1.26 stream's last
// one) is complete. A stream cut inside a batch is an error.
func (s *splitter) finish() {
	if s.state == spFailed {
		return
	}
	if s.state == spPayload || s.nbh != 0 {
		s.fail("stream ends inside a batch")
		return
	}
	if s.cur != 0 {
		s.sealCur()
	}
}
