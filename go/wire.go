package gentrace

// wire.go: the agent side of the gentrace wire protocol, version 2
// (proto/PROTOCOL.md), and the body records a Go generation travels in
// (proto/FORMAT.md: GOTRACE and CLOCK records, the GEN_END manifest).
//
// Everything read from the daemon is hostile until checked: a frame header
// announcing more than frameMax is refused before any payload is read, and
// every decoder checks each length against the bytes left.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

const (
	protoVersion = 2
	helloMagic   = 0x4C485447 // "GTHL" little-endian
	frameMax     = 1 << 20    // GTP_FRAME_MAX
	reasonMax    = 512        // GTP_REASON_MAX
	identStrMax  = 1024       // GTP_IDENT_STR_MAX
	tagsMax      = 32         // GTP_TAGS_MAX
	tokenMax     = 256        // GTP_TOKEN_MAX

	// Payload bytes of one GOTRACE record. With its record header and the
	// BATCH frame's gen it stays under the 256 KiB frames the reference
	// agent sends, far below GTP_RECORD_MAX and GTP_FRAME_MAX.
	chunkSize = 128 << 10
	// The first chunk of a generation: most generations of a quiet program
	// are a few KiB, and the spool counts memory, not bytes.
	firstChunkSize = 16 << 10
)

// Frame types (PROTOCOL.md section 3).
const (
	frHello     = 1
	frWelcome   = 2
	frBatch     = 3
	frGenEnd    = 4
	frAck       = 5
	frHeartbeat = 6
	frError     = 7
	frGoodbye   = 8
)

// Body record types (FORMAT.md section 2.2).
const (
	recClock   = 6
	recGoTrace = 8
)

// Wire error codes this client acts on (proto/gtp_error.h, positive).
const (
	codeVersion  = 7003
	codeToken    = 7009
	codeAuth     = 7020
	codeConflict = 7021
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type hello struct {
	session, key   [16]byte
	service, host  string
	pid            uint64
	processStartNs uint64
	agentVersion   string
	tags           [][2]string
	token          string
}

func putStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func frameHeader(b []byte, typ byte, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return append(b, typ)
}

// encodeHello returns the whole HELLO frame (header included). Limits are
// enforced by config resolution; here they are checked again so a bad
// value can never reach the wire.
func encodeHello(h *hello) ([]byte, error) {
	if len(h.service) > identStrMax || len(h.host) > identStrMax ||
		len(h.agentVersion) > identStrMax || len(h.tags) > tagsMax || len(h.token) > tokenMax {
		return nil, errors.New("gentrace: identity field over its protocol limit")
	}
	p := binary.LittleEndian.AppendUint32(nil, helloMagic)
	p = binary.AppendUvarint(p, protoVersion) // min_version
	p = binary.AppendUvarint(p, protoVersion) // max_version
	p = append(p, h.session[:]...)
	p = append(p, h.key[:]...) // session_key: present because max_version >= 2
	p = putStr(p, h.service)
	p = putStr(p, h.host)
	p = binary.AppendUvarint(p, h.pid)
	p = binary.AppendUvarint(p, h.processStartNs)
	p = putStr(p, h.agentVersion)
	p = binary.AppendUvarint(p, uint64(len(h.tags)))
	for _, kv := range h.tags {
		if len(kv[0]) > identStrMax || len(kv[1]) > identStrMax {
			return nil, errors.New("gentrace: tag over its protocol limit")
		}
		p = putStr(p, kv[0])
		p = putStr(p, kv[1])
	}
	p = putStr(p, h.token)
	return append(frameHeader(nil, frHello, len(p)), p...), nil
}

type frame struct {
	typ     byte
	payload []byte
}

// readFrame reads one frame; the length is checked before anything is
// allocated for the payload.
func readFrame(r *bufio.Reader) (frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n > frameMax {
		return frame{}, fmt.Errorf("frame of %d bytes over the %d limit", n, frameMax)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return frame{}, err
	}
	return frame{hdr[4], p}, nil
}

// dec is a bounds-checked reader over one payload.
type dec struct {
	p   []byte
	err error
}

func (d *dec) uv() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = errors.New("bad or truncated varint")
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *dec) str(max int) string {
	n := d.uv()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) {
		d.err = fmt.Errorf("string of %d bytes over its %d limit", n, max)
		return ""
	}
	if n > uint64(len(d.p)) {
		d.err = errors.New("truncated string")
		return ""
	}
	s := string(d.p[:n])
	d.p = d.p[n:]
	return s
}

func (d *dec) end() error {
	if d.err == nil && len(d.p) != 0 {
		d.err = errors.New("trailing bytes")
	}
	return d.err
}

type welcome struct {
	version     uint64
	hasLast     bool
	lastGen     uint64
	idleMs      uint64
	maxGenBytes uint64
}

func decodeWelcome(p []byte) (welcome, error) {
	d := dec{p: p}
	var w welcome
	w.version = d.uv()
	hl := d.uv()
	w.lastGen = d.uv()
	w.idleMs = d.uv()
	w.maxGenBytes = d.uv()
	if err := d.end(); err != nil {
		return w, fmt.Errorf("WELCOME: %v", err)
	}
	if hl > 1 || w.version > 1<<32-1 {
		return w, errors.New("WELCOME: corrupt")
	}
	w.hasLast = hl == 1
	return w, nil
}

type errorFrame struct {
	code   uint64
	hasGen bool
	gen    uint64
	reason string
}

func decodeError(p []byte) (errorFrame, error) {
	d := dec{p: p}
	var e errorFrame
	e.code = d.uv()
	hg := d.uv()
	e.gen = d.uv()
	e.reason = d.str(reasonMax)
	if err := d.end(); err != nil {
		return e, fmt.Errorf("ERROR: %v", err)
	}
	if e.code == 0 || e.code > 1<<31-1 || hg > 1 {
		return e, errors.New("ERROR: corrupt")
	}
	e.hasGen = hg == 1
	return e, nil
}

func decodeGoodbye(p []byte) (code uint64, reason string, err error) {
	d := dec{p: p}
	code = d.uv()
	reason = d.str(reasonMax)
	return code, reason, d.end()
}

func decodeAck(p []byte) (uint64, error) {
	d := dec{p: p}
	g := d.uv()
	return g, d.end()
}

// recHeader appends a record's type byte and length varint.
func recHeader(b []byte, typ byte, n int) []byte {
	b = append(b, typ)
	return binary.AppendUvarint(b, uint64(n))
}

// clockRecord is the whole CLOCK record (FORMAT.md 4.6) of a generation;
// ticks are the monotonic nanoseconds.
func clockRecord(c *genClock) []byte {
	var p []byte
	p = binary.AppendUvarint(p, c.startMono)
	p = binary.AppendUvarint(p, c.startMono)
	p = binary.AppendUvarint(p, c.startReal)
	p = binary.AppendUvarint(p, c.endMono)
	p = binary.AppendUvarint(p, c.endMono)
	p = binary.AppendUvarint(p, c.endReal)
	return append(recHeader(nil, recClock, len(p)), p...)
}

// manifest is a GEN_END payload's manifest half (FORMAT.md 4.7, 5).
type manifest struct {
	records, bytes uint64
	crc            uint32
}

// computeManifest covers the body as it is sent: one GOTRACE record per
// chunk in order, then the CLOCK record. crcs[i] is the CRC-32C of
// chunks[i], taken as it was filled (crc.go).
func computeManifest(chunks [][]byte, crcs []uint32, clock []byte) manifest {
	var m manifest
	var hdr []byte
	crc := uint32(0)
	for i, c := range chunks {
		hdr = recHeader(hdr[:0], recGoTrace, len(c))
		crc = crc32.Update(crc, castagnoli, hdr)
		crc = crcCombine(crc, crcs[i], len(c))
		m.records++
		m.bytes += uint64(len(hdr) + len(c))
	}
	crc = crc32.Update(crc, castagnoli, clock)
	m.records++
	m.bytes += uint64(len(clock))
	m.crc = crc
	return m
}

// genEndPayload: gen, records, batches (0: no EVENTS), bytes, crc u32le,
// events (0), then the ledger in whole Go generations.
func genEndPayload(gen uint64, m manifest, dropped, evicted, rejected uint64) []byte {
	var p []byte
	p = binary.AppendUvarint(p, gen)
	p = binary.AppendUvarint(p, m.records)
	p = binary.AppendUvarint(p, 0)
	p = binary.AppendUvarint(p, m.bytes)
	p = binary.LittleEndian.AppendUint32(p, m.crc)
	p = binary.AppendUvarint(p, 0)
	p = binary.AppendUvarint(p, dropped)
	p = binary.AppendUvarint(p, evicted)
	p = binary.AppendUvarint(p, rejected)
	return p
}

func binaryGen(b []byte, gen uint64) []byte { return binary.AppendUvarint(b, gen) }
