package gentrace

// crc.go: CRC-32C of a generation's body from per-chunk CRCs.
//
// The manifest's CRC covers each chunk's GOTRACE record header and then
// the chunk. A chunk's own CRC is computed while its bytes are copied in
// (client.data), when they are in the cache; at send time, up to a second
// later, they are not, and reading them again cost about 2% of a traced
// program's CPU at 28 MB/s of trace (0.6 ns per byte from memory against
// 0.05 from the cache). The record header is only known when the chunk is
// complete, so the body CRC is put together at send time from the header
// bytes and each chunk's CRC with crcCombine: CRC(A||B) from CRC(A),
// CRC(B) and len(B), by multiplying CRC(A) by x^(8*len(B)) modulo the
// polynomial (arithmetic in GF(2), bit-reflected like the CRC itself).

// castagnoliRev is the CRC-32C polynomial, bit-reflected.
const castagnoliRev = 0x82f63b78

// mulModP returns a*b modulo the polynomial (reflected: bit 31 is x^0).
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliRev
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] = x^(2^k) modulo the polynomial.
var x2k = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(x2k[k], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32C of A||B given crcA, crcB (as
// crc32.Update(0, castagnoli, ...) returns them) and len(B).
func crcCombine(crcA, crcB uint32, lenB int) uint32 {
	return mulModP(xPow8n(uint64(lenB)), crcA) ^ crcB
}
