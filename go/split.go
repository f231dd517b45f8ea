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
	maxBatchSize        = 64 << 10 // tracev2.MaxBatchSize
	goHeaderSize        = 16
)

type splitSink interface {
	header(minor int) // the file header was read: go 1.<minor>
	begin(gen uint64) // a generation starts
	data(p []byte)    // bytes of the current generation (borrowed)
	seal()            // the current generation is complete
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
			p = p[n:]
			s.left -= n
			s.written += n
			if s.left == 0 {
				s.state = spBatchHdr
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
	s.sink.seal()
	s.cur = 0
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
	gen, size := v[0], v[3]
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
			s.sink.seal()
		}
		s.cur, s.last = gen, gen
		s.sink.begin(gen)
	default:
		s.fail("batch of generation %d after generation %d", gen, s.last)
		return
	}
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
		s.sink.seal()
		s.cur = 0
	}
}
