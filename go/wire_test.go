package gentrace

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

func TestCRC32C_checkValueOfFormatMd(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xE3069283 {
		t.Fatalf("crc32c = %#x", got)
	}
}

// The HELLO of PROTOCOL.md's worked example, in its version-2 layout: the
// 16-byte session key right after the session id.
func TestHello_v2LayoutIsTheWorkedExamplePlusTheKey(t *testing.T) {
	h := &hello{service: "api", host: "h1", pid: 300, agentVersion: "0.1.0",
		tags: [][2]string{{"env", "prod"}}, token: "tk"}
	for i := range h.session {
		h.session[i] = 0x10 + byte(i)
		h.key[i] = 0xa0 + byte(i)
	}
	got, err := encodeHello(h)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("43000000" + "01" + "4754484c" + "0202" +
		"101112131415161718191a1b1c1d1e1f" + "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf" +
		"03617069" + "026831" + "ac02" + "00" + "05302e312e30" +
		"0103656e760470726f64" + "02746b")
	if !bytes.Equal(got, want) {
		t.Fatalf("HELLO\n got %x\nwant %x", got, want)
	}
	h.token = string(make([]byte, 257))
	if _, err := encodeHello(h); err == nil {
		t.Fatal("token over 256 bytes encoded")
	}
}

func TestManifest_coversRecordsAsSent(t *testing.T) {
	chunks := [][]byte{bytes.Repeat([]byte{1}, 200), {2, 3}}
	c := genClock{1, 2, 3, 4}
	clock := clockRecord(&c)
	crcs := []uint32{crc32.Checksum(chunks[0], castagnoli), crc32.Checksum(chunks[1], castagnoli)}
	m := computeManifest(chunks, crcs, clock)
	var body []byte
	for _, ch := range chunks {
		body = append(recHeader(body, recGoTrace, len(ch)), ch...)
	}
	body = append(body, clock...)
	if m.records != 3 || m.bytes != uint64(len(body)) || m.crc != crc32.Checksum(body, castagnoli) {
		t.Fatalf("manifest %+v for %d body bytes", m, len(body))
	}
	// What writeGen puts on the wire decodes back to those records.
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	g := &goGen{num: 7, chunks: chunks, crcs: crcs, clock: c, dropped: 1, evicted: 2, rejected: 3}
	if err := writeGen(bw, &buf, g, 0); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(&buf)
	var wire []byte
	for {
		f, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		d := dec{p: f.payload}
		if d.uv() != 7 {
			t.Fatal("frame of another generation")
		}
		if f.typ == frGenEnd {
			want := genEndPayload(7, m, 1, 2, 3)
			if !bytes.Equal(f.payload, want) {
				t.Fatalf("GEN_END %x want %x", f.payload, want)
			}
			break
		}
		if f.typ != frBatch {
			t.Fatalf("frame type %d", f.typ)
		}
		wire = append(wire, d.p...)
	}
	if !bytes.Equal(wire, body) {
		t.Fatal("BATCH records differ from the manifest's body")
	}
}

func TestDecoders_hostileDaemonFrames(t *testing.T) {
	// A header announcing more than 1 MiB is refused before the payload.
	r := bufio.NewReader(bytes.NewReader([]byte{0x01, 0x00, 0x10, 0x00, 2}))
	if _, err := readFrame(r); err == nil {
		t.Fatal("oversized frame accepted")
	}
	for _, p := range [][]byte{{}, {2}, {2, 2, 0, 1, 1}, {2, 0, 0, 1, 1, 9}} {
		if _, err := decodeWelcome(p); err == nil {
			t.Fatalf("WELCOME %x accepted", p)
		}
	}
	if w, err := decodeWelcome([]byte{2, 1, 41, 0xe0, 0xd4, 0x03, 0x80, 0x80, 0x80, 0x20}); err != nil ||
		!w.hasLast || w.lastGen != 41 || w.idleMs != 60000 || w.maxGenBytes != 64<<20 {
		t.Fatalf("WELCOME %+v %v", w, err)
	}
	long := append([]byte{0xdf, 0x36, 1, 0x2b, 0x81, 0x04}, make([]byte, 513)...)
	for _, p := range [][]byte{{0, 0, 0, 0}, {0xdf, 0x36, 2, 0, 0}, {0xdf, 0x36, 1, 0x2b, 5, 'a'}, long} {
		if _, err := decodeError(p); err == nil {
			t.Fatalf("ERROR %x accepted", p)
		}
	}
	if e, err := decodeError([]byte{0xdf, 0x36, 1, 0x2b, 3, 'b', 'a', 'd'}); err != nil ||
		e.code != 7007 || !e.hasGen || e.gen != 43 || e.reason != "bad" {
		t.Fatalf("ERROR %+v %v", e, err)
	}
}
