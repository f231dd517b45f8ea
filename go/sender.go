package gentrace

// sender.go: the client's one network goroutine (PROTOCOL.md section 5.2).
//
//	backoff -> connect -> HELLO sent -> streaming -> (lost) -> backoff ...
//
// It dials the addresses of the failover list in order; after the whole
// list failed it waits 100 ms doubling to 10 s, with jitter (uniform in
// [d/2, d]) so a fleet does not reconnect in lockstep. On every lost
// connection everything sent but not ACKed goes back to the queue and is
// resent from its first byte on the next one.
//
// Invariants:
//  1. Only this goroutine writes to the connection; a reader goroutine per
//     connection reads frames and closes the connection when nothing came
//     for 3 x idle_timeout_ms (the daemon is gone), which also unblocks a
//     write stuck on a daemon that stopped reading.
//  2. mu is never held across a network call (client invariant 1).
//  3. The sender exits only when Stop asked it to and either everything is
//     resolved (ACKed or rejected) or the flush deadline passed.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"time"
)

const (
	stBackoff = iota
	stConnecting
	stHelloSent
	stStreaming
)

const (
	connectTimeout   = 3 * time.Second
	handshakeTimeout = 5 * time.Second
	backoffMin       = 100 * time.Millisecond
	backoffMax       = 10 * time.Second
	defaultIdle      = 60 * time.Second
)

var errStopped = errors.New("stopped")

// finished says whether the sender may exit (invariant 3). Under mu.
func (c *client) finished(now time.Time) bool {
	if !c.closing {
		return false
	}
	if now.After(c.deadline) || c.goMinor == 0 {
		return true
	}
	n, ledger := c.sp.pending()
	return n == 0 && !ledger
}

func (c *client) run() {
	defer close(c.done)
	defer func() { // nothing reads or writes the chunks any more
		c.mu.Lock()
		c.sp.release()
		c.mu.Unlock()
	}()
	backoff := backoffMin
	rng := rand.New(rand.NewSource(int64(c.sessionID[0])<<8 ^ int64(pid) ^ time.Now().UnixNano()))
	idx := 0
	for {
		c.mu.Lock()
		fin, minor := c.finished(time.Now()), c.goMinor
		c.mu.Unlock()
		if fin {
			return
		}
		if minor == 0 { // no trace header yet: nothing to say HELLO with
			<-c.wake
			continue
		}
		welcomed, err := c.session(c.cfg.addrs[idx])
		if err == errStopped {
			continue // finished: Stop is waiting
		}
		if err != nil {
			c.logf("gentrace: %s: %v", c.cfg.addrs[idx], err)
		}
		if welcomed {
			backoff = backoffMin
		}
		idx++
		if idx < len(c.cfg.addrs) && !welcomed {
			continue // next address at once
		}
		idx %= len(c.cfg.addrs)
		d := backoff/2 + time.Duration(rng.Int63n(int64(backoff-backoff/2)+1))
		if backoff *= 2; backoff > backoffMax {
			backoff = backoffMax
		}
		c.sleep(d)
	}
}

// sleep waits d, or less when Stop's deadline comes first.
func (c *client) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-c.wake:
			c.mu.Lock()
			closing, dl := c.closing, c.deadline
			c.mu.Unlock()
			if closing {
				if r := time.Until(dl); r < d {
					t.Reset(r)
				}
			}
		}
	}
}

func (c *client) setState(st int, conn closer) {
	c.mu.Lock()
	c.state, c.conn = st, conn
	c.mu.Unlock()
}

// session runs one connection to its end. welcomed: the daemon accepted us.
func (c *client) session(addr string) (welcomed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	c.mu.Lock()
	if c.closing {
		ctx, cancel = context.WithDeadline(ctx, c.deadline)
	}
	c.state = stConnecting
	c.mu.Unlock()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	cancel()
	if err != nil {
		c.setState(stBackoff, nil)
		return false, err
	}
	c.setState(stHelloSent, conn)
	defer func() {
		conn.Close()
		c.mu.Lock()
		c.state, c.conn = stBackoff, nil
		c.sp.requeue()
		if c.cur != nil {
			c.cur.early = 0 // early.go invariant 1
		}
		c.aborts = nil // invariant 3: gone with the connection
		c.mu.Unlock()
	}()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if c.cfg.tls != nil {
		conn.SetDeadline(time.Now().Add(handshakeTimeout))
		tc, err := tlsClient(context.Background(), c.cfg.tls, conn, addr)
		if err != nil {
			c.countTLSFailure()
			return false, err
		}
		conn = tc // closed by the deferred Close (it closes the socket too)
		c.setState(stHelloSent, conn)
	}

	c.mu.Lock()
	h := &hello{session: c.sessionID, key: c.key, service: c.cfg.service, host: c.cfg.host,
		pid: pid, processStartNs: uint64(startedAt.UnixNano()), agentVersion: AgentVersion,
		token: c.cfg.token}
	h.tags = append(h.tags, [2]string{"format", "go"}, [2]string{"go_version", fmt.Sprintf("1.%d", c.goMinor)})
	h.tags = append(h.tags, c.cfg.tags...)
	c.mu.Unlock()
	hf, err := encodeHello(h)
	if err != nil {
		return false, err
	}
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	if _, err := conn.Write(hf); err != nil {
		return false, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	var w welcome
	for {
		f, err := readFrame(br)
		if err != nil {
			if isTLSAlert(err) {
				c.countTLSFailure() // tls.go invariant 2
			}
			return false, fmt.Errorf("waiting for WELCOME: %v", err)
		}
		switch f.typ {
		case frHeartbeat:
			continue
		case frWelcome:
			if w, err = decodeWelcome(f.payload); err != nil {
				return false, err
			}
			if w.version != protoVersion {
				return false, fmt.Errorf("daemon chose protocol version %d, client speaks %d", w.version, protoVersion)
			}
		case frError:
			e, err := decodeError(f.payload)
			if err != nil {
				return false, err
			}
			if e.code == codeAuth {
				c.mu.Lock()
				c.authRef++
				c.mu.Unlock()
			}
			return false, fmt.Errorf("daemon refused the session: error %d: %s", e.code, e.reason)
		case frGoodbye:
			_, reason, _ := decodeGoodbye(f.payload)
			return false, fmt.Errorf("daemon said goodbye: %s", reason)
		default:
			return false, fmt.Errorf("unexpected frame type %d before WELCOME", f.typ)
		}
		break
	}
	conn.SetDeadline(time.Time{})

	idle := time.Duration(w.idleMs) * time.Millisecond
	if idle <= 0 {
		idle = defaultIdle
	}
	hb := idle / 3
	if hb < 50*time.Millisecond {
		hb = 50 * time.Millisecond
	} else if hb > 10*time.Second {
		hb = 10 * time.Second
	}
	c.mu.Lock()
	c.maxGen = w.maxGenBytes
	c.sp.welcome(w.hasLast, w.lastGen)
	c.state = stStreaming
	c.mu.Unlock()

	// Reader (invariant 1).
	in := make(chan frame, 64)
	rerr := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			conn.SetReadDeadline(time.Now().Add(3 * idle))
			f, err := readFrame(br)
			if err != nil {
				rerr <- err
				conn.Close()
				return
			}
			select {
			case in <- f:
			case <-quit:
				return
			}
		}
	}()

	bw := bufio.NewWriterSize(conn, 256<<10)
	lastSend := time.Now()
	hbTimer := time.NewTimer(hb)
	defer hbTimer.Stop()
	for {
		// Answers first: ACKs free the spool.
		for drained := false; !drained; {
			select {
			case f := <-in:
				if err := c.handle(f); err != nil {
					return true, err
				}
			default:
				drained = true
			}
		}
		if err := c.sendAborts(bw); err != nil {
			return true, err
		}
		c.mu.Lock()
		now := time.Now()
		var g *goGen
		if c.closing && now.After(c.deadline) {
			c.mu.Unlock()
			c.goodbye(bw)
			return true, errStopped
		}
		g = c.sp.next()
		if g == nil && c.closing {
			if n, ledger := c.sp.pending(); n == 0 && ledger {
				c.ledgerGen()
				g = c.sp.next()
			} else if n == 0 {
				c.mu.Unlock()
				c.goodbye(bw)
				return true, errStopped
			}
		}
		var eg *goGen
		var early [][]byte
		from := 0
		if g != nil {
			from = g.early
		} else {
			eg, early = c.earlyWork()
		}
		closing, dl := c.closing, c.deadline
		c.mu.Unlock()
		if eg != nil {
			err := writeChunks(bw, conn, eg.num, early, nil)
			if err == nil {
				err = bw.Flush()
			}
			c.mu.Lock()
			c.earlyDone(eg, len(early), err == nil)
			c.mu.Unlock()
			if err != nil {
				return true, err
			}
			lastSend = time.Now()
			continue
		}
		if g != nil {
			if err := writeGen(bw, conn, g, from); err != nil {
				return true, err
			}
			c.mu.Lock()
			g.maybeStored = true
			c.mu.Unlock()
			lastSend = time.Now()
			continue
		}
		wait := hb - time.Since(lastSend)
		if closing {
			if r := time.Until(dl); r < wait {
				wait = r
			}
		}
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		hbTimer.Reset(wait)
		select {
		case f := <-in:
			if err := c.handle(f); err != nil {
				return true, err
			}
		case err := <-rerr:
			return true, err
		case <-c.wake:
		case <-hbTimer.C:
			if time.Since(lastSend) >= hb {
				if err := writeFrame(bw, frHeartbeat, nil); err != nil {
					return true, err
				}
				if err := bw.Flush(); err != nil {
					return true, err
				}
				lastSend = time.Now()
			}
		}
		if !hbTimer.Stop() {
			select {
			case <-hbTimer.C:
			default:
			}
		}
	}
}

func (c *client) goodbye(bw *bufio.Writer) {
	p := putStr([]byte{0}, "agent stopping")
	writeFrame(bw, frGoodbye, p)
	bw.Flush()
}

// handle acts on one frame from the daemon; an error ends the connection.
func (c *client) handle(f frame) error {
	switch f.typ {
	case frAck:
		g, err := decodeAck(f.payload)
		if err != nil {
			return fmt.Errorf("ACK: %v", err)
		}
		c.mu.Lock()
		c.sp.ack(g)
		c.mu.Unlock()
		c.poke()
		return nil
	case frError:
		e, err := decodeError(f.payload)
		if err != nil {
			return err
		}
		if !e.hasGen {
			return fmt.Errorf("daemon error %d: %s", e.code, e.reason)
		}
		c.logf("gentrace: daemon rejected generation %d: error %d: %s", e.gen, e.code, e.reason)
		c.mu.Lock()
		c.sp.reject(e.gen)
		c.mu.Unlock()
		c.poke()
		return nil
	case frHeartbeat:
		return nil
	case frGoodbye:
		_, reason, _ := decodeGoodbye(f.payload)
		return fmt.Errorf("daemon said goodbye: %s", reason)
	default:
		return fmt.Errorf("unexpected frame type %d", f.typ)
	}
}

func writeFrame(bw *bufio.Writer, typ byte, p []byte) error {
	var hdr [5]byte
	hdr[0], hdr[1], hdr[2], hdr[3] = byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), byte(len(p)>>24)
	hdr[4] = typ
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	_, err := bw.Write(p)
	return err
}

// writeGen sends one generation: a BATCH frame per GOTRACE chunk (from
// chunk from on: those before went early, early.go), one with the CLOCK
// record, then GEN_END with the manifest over exactly those records in that
// order, in one writev. Its fields are immutable once sealed except the
// ledger, fixed before the first send (spool invariant 1).
func writeGen(bw *bufio.Writer, conn io.Writer, g *goGen, from int) error {
	clock := clockRecord(&g.clock)
	m := computeManifest(g.chunks, g.crcs, clock)
	tail := appendFrame(nil, frBatch, append(binaryGen(nil, g.num), clock...))
	tail = appendFrame(tail, frGenEnd, genEndPayload(g.num, m, g.dropped, g.evicted, g.rejected))
	if err := writeChunks(bw, conn, g.num, g.chunks[from:], tail); err != nil {
		return err
	}
	return bw.Flush()
}

// appendFrame appends a whole frame (header and payload) to b.
func appendFrame(b []byte, typ byte, p []byte) []byte {
	b = append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), byte(len(p)>>24), typ)
	return append(b, p...)
}
