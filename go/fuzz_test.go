package gentrace

import (
	"bufio"
	"bytes"
	"testing"
)

// FuzzSplit: any byte stream, cut anywhere, never panics, and whatever the
// splitter accepted is passed on byte for byte (go test runs the seeds;
// go test -fuzz=FuzzSplit explores).
func FuzzSplit(f *testing.F) {
	f.Add([]byte("go 1.26 trace\x00\x00\x00\x01\x01\x00\x00\x02ab\x34"), 3)
	f.Add([]byte("go 1.22 trace\x00\x00\x00\x01\x05\x01\x01\x00\x01\x06\x01\x01\x00"), 1)
	f.Add([]byte("go 1.25 trace\x00\x00\x00\x31\x02\x01\x01\x01\x01x\x34"), 7)
	f.Fuzz(func(t *testing.T, b []byte, cut int) {
		c := &collect{}
		s := newSplitter(collectSink{c})
		if cut <= 0 || cut > len(b) {
			cut = len(b)
		}
		s.write(b[:cut])
		s.write(b[cut:])
		s.finish()
		var all []byte
		for _, d := range c.data {
			all = append(all, d...)
		}
		if s.err == nil && len(b) >= 16 && c.minor != 25 && !bytes.Equal(all, b[16:]) {
			t.Fatalf("accepted stream changed: %x -> %x", b[16:], all)
		}
	})
}

// FuzzDaemonFrames: whatever a daemon sends decodes or errors, never
// panics, and never allocates for a frame over the limit.
func FuzzDaemonFrames(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 2, 2, 1, 41, 0xe0, 0xd4, 3, 0x80, 0x80, 0x80, 0x20})
	f.Add([]byte{8, 0, 0, 0, 7, 0xdf, 0x36, 1, 0x2b, 3, 'b', 'a', 'd'})
	f.Add([]byte{1, 0, 0, 0, 5, 0x2a, 0, 0, 0, 0, 6})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		c := &client{cfg: &resolved{}, wake: make(chan struct{}, 1)}
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			decodeWelcome(fr.payload)
			decodeGoodbye(fr.payload)
			c.handle(fr)
		}
	})
}
