package gentrace

// client.go: the one client of a process: runtime/trace writes into it
// (the sink side, under mu, never waiting on the network), and its sender
// goroutine (sender.go) streams the spool to gentraced.
//
// Invariants:
//  1. Nothing holds mu while it waits on the network or on another lock;
//     so the runtime's trace reader goroutine, which calls Write, is delayed
//     at most by a few spool operations.
//  2. A generation is counted once in spool.written when it is complete,
//     whether it is then spooled or dropped.
//  3. start/stop of the package-level client are serialized by lifeMu.

import (
	"crypto/rand"
	"errors"
	"hash/crc32"
	"os"
	"runtime/trace"
	"sync"
	"time"
)

var (
	// ErrNotStarted is returned by Stop and Snapshot without Start.
	ErrNotStarted = errors.New("gentrace: not started")
	// ErrStarted is returned by Start while a client runs.
	ErrStarted = errors.New("gentrace: already started")
	// ErrNoFlightRecorder: Config.FlightRecorder needs Go 1.25 or later.
	ErrNoFlightRecorder = errors.New("gentrace: the flight recorder needs Go 1.25 or later")
	// ErrNotFlightRecorder: Snapshot without Config.FlightRecorder.
	ErrNotFlightRecorder = errors.New("gentrace: Snapshot needs Config.FlightRecorder")
)

var (
	lifeMu sync.Mutex
	active *client
	last   *client // the last client stopped, for GetStats after Stop
	// monoBase anchors the monotonic clock of CLOCK records: nanoseconds
	// since the package was initialized, on Go's monotonic clock.
	monoBase  = time.Now()
	startedAt = time.Now()
)

func monoNow() uint64 { return uint64(time.Since(monoBase)) + 1 }

func realNow() uint64 { return uint64(time.Now().UnixNano()) }

type client struct {
	cfg       *resolved
	sessionID [16]byte
	key       [16]byte

	mu       sync.Mutex
	sp       spool
	split    *splitter
	goMinor  int      // from the trace header, 0 until it was read
	cur      *goGen   // generation being built
	dropping bool     // cur is being dropped
	skipping bool     // cur was handled by an earlier snapshot
	edge     genClock // end of the previous generation: start of the next
	err      error    // the trace stream was corrupt
	conn     closer   // live connection, for Stop's deadline
	state    int      // connection state, for Stats
	tlsFails uint64   // Stats.TLSFailures
	authRef  uint64   // Stats.AuthRefused
	maxGen   uint64   // WELCOME max_gen_bytes (0 until known)
	closing  bool
	deadline time.Time

	// Early sending (early.go).
	earlyChunks int      // full chunks that make a batch (earlyBatch)
	aborts      []uint64 // generations to abort on the live connection
	earlySent   uint64   // Stats.EarlyChunks
	earlyAborts uint64   // Stats.Aborts

	wake chan struct{} // cap 1: something to send, or stopping
	done chan struct{} // closed when the sender exits
	fr   flightRecorder
}

type closer interface{ Close() error }

// Start begins tracing the program with runtime/trace and streaming it to
// gentraced, or, with cfg.FlightRecorder, recording it in memory for
// Snapshot. The daemon need not be up: the client spools and connects
// when it can. Start fails only for a bad configuration, a running client
// or tracer, or a Go too old for what cfg asks.
func Start(cfg Config) error {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	if active != nil {
		return ErrStarted
	}
	r, err := resolve(cfg)
	if err != nil {
		return err
	}
	c := &client{cfg: r, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if _, err := rand.Read(c.sessionID[:]); err != nil {
		return err
	}
	if _, err := rand.Read(c.key[:]); err != nil {
		return err
	}
	c.sp.limit = r.spoolBytes
	c.earlyChunks = earlyBatch(r.spoolBytes)
	c.split = newSplitter(c)
	c.edge.startMono, c.edge.startReal = monoNow(), realNow()
	if r.flight != nil {
		if err := c.startFlight(r.flight); err != nil {
			return err
		}
	} else if err := trace.Start(writer{c}); err != nil {
		return err
	}
	go c.run()
	active = c
	return nil
}

// Stop ends tracing, sends what is left and waits at most the flush
// timeout (plus a second to close) for the daemon to acknowledge it.
// Generations still unacknowledged then are lost with the client; Stats
// taken before Stop returns say how many. Stop returns an error only when
// the client was not started or the runtime's trace stream could not be
// read (a corrupt stream); an unreachable daemon is not an error.
func Stop() error {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	c := active
	if c == nil {
		return ErrNotStarted
	}
	active, last = nil, c
	if c.cfg.flight != nil {
		c.fr.stop()
	} else {
		trace.Stop() // returns once every byte went through Write
	}
	c.mu.Lock()
	c.split.finish()
	c.afterSplit()
	c.closing = true
	c.deadline = time.Now().Add(c.cfg.flushTimeout)
	err := c.err
	c.mu.Unlock()
	c.poke()
	t := time.NewTimer(c.cfg.flushTimeout)
	defer t.Stop()
	select {
	case <-c.done:
		return err
	case <-t.C:
	}
	// The sender may be stuck writing to a daemon that stopped reading:
	// closing the connection unblocks it.
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	select {
	case <-c.done:
	case <-time.After(time.Second):
	}
	return err
}

// Snapshot sends the flight recorder's current window (Config.FlightRecorder)
// to gentraced: its generations not sent by an earlier snapshot are queued
// and Snapshot returns; they are delivered in the background like streamed
// ones.
func Snapshot() error {
	lifeMu.Lock()
	c := active
	lifeMu.Unlock()
	if c == nil {
		return ErrNotStarted
	}
	if c.cfg.flight == nil {
		return ErrNotFlightRecorder
	}
	return c.snapshot()
}

// Stats reports the client's counters, in whole Go generations.
type Stats struct {
	Session   string // hex id of this run, as gentraced lists it
	Connected bool   // a daemon welcomed the client and the connection is up
	// Generations is every Go generation the runtime finished; each one is
	// eventually Stored, Dropped, Evicted or Rejected, or still Pending.
	Generations uint64
	Stored      uint64 // acknowledged by gentraced
	Dropped     uint64 // not spooled: no room (or bigger than the spool)
	Evicted     uint64 // pushed out of the spool by newer ones
	Rejected    uint64 // refused by gentraced
	Pending     int    // spooled, not yet acknowledged
	SpoolBytes  int    // memory held by the spool now
	// TLSFailures counts connections lost to TLS: a failed handshake, an
	// untrusted daemon, or a daemon refusing this program's certificate.
	TLSFailures uint64
	// AuthRefused counts HELLOs the daemon refused with AUTH (e.g. the
	// client certificate does not name this service).
	AuthRefused uint64
	// EarlyChunks counts chunks sent before their generation ended; Aborts
	// counts generations dropped after some of their chunks were sent,
	// which the client then told the daemon to discard. Both are also
	// counted above (the aborted ones as Dropped).
	EarlyChunks uint64
	Aborts      uint64
}

// GetStats returns the counters of the running client, or, between Stop
// and the next Start, the final counters of the last one (zero if none).
func GetStats() Stats {
	lifeMu.Lock()
	c := active
	if c == nil {
		c = last
	}
	lifeMu.Unlock()
	if c == nil {
		return Stats{}
	}
	return c.stats()
}

func (c *client) stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		Session:     hexID(c.sessionID),
		Connected:   c.state == stStreaming,
		Generations: c.sp.written,
		Stored:      c.sp.stored,
		Dropped:     c.sp.dropped,
		Evicted:     c.sp.evicted,
		Rejected:    c.sp.rejected,
		SpoolBytes:  c.sp.bytes,
		TLSFailures: c.tlsFails,
		AuthRefused: c.authRef,
		EarlyChunks: c.earlySent,
		Aborts:      c.earlyAborts,
	}
	for _, g := range c.sp.gens {
		if !g.ledgerOnly {
			s.Pending++
		}
	}
	return s
}

func hexID(b [16]byte) string {
	const hx = "0123456789abcdef"
	out := make([]byte, 32)
	for i, x := range b {
		out[2*i], out[2*i+1] = hx[x>>4], hx[x&15]
	}
	return string(out)
}

func (c *client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writer is what runtime/trace writes to. It never fails and never waits
// on the network (invariant 1): a Write error would stop the runtime's
// tracing for good.
type writer struct{ c *client }

func (w writer) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	c.split.write(p)
	c.afterSplit()
	c.mu.Unlock()
	return len(p), nil
}

// afterSplit records a splitter failure once; the generation being built
// when the stream broke is dropped. Under mu.
func (c *client) afterSplit() {
	if c.split.err != nil && c.err == nil {
		c.err = c.split.err
		c.logf("%v", c.err)
		if c.cur != nil && !c.skipping {
			c.abortSent(c.cur)
			c.cur = nil
			c.sp.written++ // it was written, and is lost: counted as dropped
			c.dropGen()
		}
	}
}

func (c *client) logf(format string, a ...any) {
	if c.cfg.logf != nil {
		c.cfg.logf(format, a...)
	}
}

// The splitSink side, called by the splitter under mu.

func (c *client) header(minor int) {
	if c.goMinor == 0 {
		c.goMinor = minor
		c.poke() // the sender can say HELLO now
	}
}

func (c *client) begin(num uint64) {
	c.cur = &goGen{num: num, clock: c.edge}
	// A flight-recorder snapshot overlapping an earlier one: that
	// generation was handled (and counted) already.
	c.skipping = num <= c.sp.lastNum
}

func (c *client) data(p []byte) {
	g := c.cur
	if g == nil || c.dropping || c.skipping {
		return
	}
	// One generation may take half the spool: it grows by evicting older
	// ones, and one that ends up too big is dropped, so at most half the
	// spool is lost for it. The daemon refuses a generation over WELCOME's
	// max_gen_bytes (GEN_START, record headers and GEN_END included): keep
	// a margin under that too.
	limit := c.sp.limit / 2
	if c.maxGen != 0 && c.maxGen < uint64(limit)+genMargin {
		limit = int(c.maxGen) - genMargin
	}
	if g.size+len(p) > limit {
		c.dropCur()
		return
	}
	g.size += len(p)
	for len(p) > 0 {
		n := len(g.chunks)
		if n == 0 || len(g.chunks[n-1]) == cap(g.chunks[n-1]) {
			// The spool counts memory, chunk capacities: a generation
			// starts small (most are) and its chunks double up to full
			// size, so at most half of its memory is unused.
			size := chunkSize
			if n < 3 {
				size = firstChunkSize << n
			}
			if !c.sp.reserve(size) {
				c.dropCur()
				return
			}
			g.mem += size
			if n > 0 && n-g.early >= c.earlyChunks {
				c.poke() // a batch of full chunks: the sender may send them now (early.go)
			}
			if size == chunkSize {
				g.chunks = append(g.chunks, c.sp.chunk())
			} else {
				g.chunks = append(g.chunks, make([]byte, 0, size))
			}
			g.crcs = append(g.crcs, 0)
			n++
		}
		last := g.chunks[n-1]
		k := copy(last[len(last):cap(last)], p)
		g.chunks[n-1] = last[:len(last)+k]
		// The CRC now, while the bytes are in the cache (crc.go).
		g.crcs[n-1] = crc32.Update(g.crcs[n-1], castagnoli, last[len(last):len(last)+k])
		p = p[k:]
	}
}

// dropCur: no room for the generation being built; it is dropped whole
// (and counted at seal). Under mu.
func (c *client) dropCur() {
	g := c.cur
	c.sp.abandon()
	if !g.sending { // else the sender may be reading them (early.go 3)
		c.sp.recycle(g.chunks)
	}
	c.abortSent(g)
	g.chunks, g.crcs, g.size, g.mem = nil, nil, 0, 0
	c.dropping = true
}

func (c *client) seal(info genInfo) {
	g := c.cur
	c.cur = nil
	if g == nil {
		return
	}
	now := genClock{startMono: monoNow(), startReal: realNow()}
	g.clock.endMono, g.clock.endReal = now.startMono, now.startReal
	c.edge = now
	// Go 1.25+: the edges from the runtime's own clock snapshot, right even
	// for a flight-recorder window sent minutes later. Before 1.25: when
	// the client saw the generation begin and end, a second or so late.
	if e, ok := info.edges(); ok {
		g.clock = e
	}
	if c.skipping {
		c.skipping = false
		return
	}
	c.sp.written++
	if g.num > c.sp.lastNum {
		c.sp.lastNum = g.num
	}
	if c.dropping {
		c.dropping = false
		c.dropGen()
		return
	}
	c.sp.add(g)
	c.poke()
}

// dropGen counts a generation that could not be spooled. Under mu.
func (c *client) dropGen() {
	c.sp.abandon()
	c.sp.dropped++
	c.sp.pendDropped++
}

// ledgerGen queues a generation without Go bytes that carries ledger
// counts no other generation will carry (the losses came after the last
// one was sent). Under mu.
func (c *client) ledgerGen() {
	now := genClock{startMono: monoNow(), startReal: realNow()}
	c.sp.lastNum++
	g := &goGen{num: c.sp.lastNum, ledgerOnly: true,
		clock: genClock{c.edge.startMono, c.edge.startReal, now.startMono, now.startReal}}
	c.sp.gens = append(c.sp.gens, g)
}

var pid = uint64(os.Getpid())

// genMargin: bytes of a stored generation besides its Go bytes (GEN_START
// with the identity and tags, GOTRACE headers, CLOCK, GEN_END), rounded up.
const genMargin = 80 << 10
