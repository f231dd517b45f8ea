#!/usr/bin/env python3
"""hostile.py: hostile clients against both ports of a running gentraced.

  hostile.py AGENT_HOST:PORT HTTP_HOST:PORT SECONDS [SESSION_QUERY]

For SECONDS, several attackers run at once, each in a loop:

  agent port
    garbage      random bytes instead of HELLO: must be closed by the daemon
    oversized    a frame header announcing ~2 GiB: must be closed at once
    truncated    a header announcing 100 bytes, then 10 bytes and silence:
                 must be closed by the handshake timeout
    silent       connect and say nothing: closed by the handshake timeout
    claim        HELLO (protocol v2) with the id of a session listed by
                 /v1/agents and a random key: must get ERROR(AUTH) and be
                 closed, never WELCOME (the honest agent keeps streaming)
  HTTP port
    garbage      non-HTTP bytes: an error status or a close
    badparam     GET /v1/trace?from=banana: 400 with a JSON error body
    slowloris    request headers one byte every 0.3 s, never finished
    slowreader   GET a whole window with a tiny receive buffer, reading a
                 few hundred bytes every 0.2 s

Prints one line `HOSTILE key=value ...` with, per attacker, attempts and how
many ended as expected, and the longest time the daemon took to close a
connection it had to close. Exit status 1 when an expectation failed:
a garbage/oversized/truncated/silent agent connection that was still open
after its bound, a bad HTTP request not refused, or a refused connect (the
daemon stopped accepting). Slowloris and slow readers are reported (whether
and when the daemon cut them) but the runner judges their effect: ingest must
go on and /healthz must answer meanwhile.
"""
import json
import os
import socket
import struct
import sys
import threading
import time

lock = threading.Lock()
stats = {}
problems = []


def bump(key, n=1):
    with lock:
        stats[key] = stats.get(key, 0) + n


def note_max(key, v):
    with lock:
        if v > stats.get(key, 0):
            stats[key] = round(v, 2)


def problem(msg):
    with lock:
        if len(problems) < 20:
            problems.append(msg)


def addr(s):
    h, p = s.rsplit(":", 1)
    return (h.strip("[]"), int(p))


def wait_closed(sock, bound):
    """Reads until the peer closes; True if it did within bound seconds."""
    t0 = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - t0 < bound:
        try:
            b = sock.recv(65536)
            if not b:
                return True, time.monotonic() - t0
        except socket.timeout:
            continue
        except OSError:
            return True, time.monotonic() - t0
    return False, bound


def connect(a):
    try:
        return socket.create_connection(a, timeout=5)
    except OSError as e:
        bump("connect_refused")
        problem("connect %s: %s" % (a, e))
        return None


def agent_attack(kind, a, deadline, bound):
    while time.monotonic() < deadline:
        s = connect(a)
        if s is None:
            time.sleep(0.2)
            continue
        bump("agent_%s" % kind)
        try:
            if kind == "garbage":
                s.sendall(os.urandom(256))
            elif kind == "oversized":
                s.sendall(struct.pack("<IB", 0x7FFFFFF0, 1) + b"\0" * 16)
            elif kind == "truncated":
                s.sendall(struct.pack("<IB", 100, 1) + b"\0" * 10)
        except OSError:
            pass  # closed while we wrote: also a close
        ok, took = wait_closed(s, bound)
        s.close()
        if ok:
            bump("agent_%s_closed" % kind)
            note_max("agent_%s_close_s" % kind, took)
        else:
            problem("agent %s connection still open after %.1fs" % (kind, bound))
        time.sleep(0.05)


def uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pstr(b):
    return uvarint(len(b)) + b


def hello_v2(session, key):
    """A version-2 HELLO frame (proto/PROTOCOL.md 3.1)."""
    p = struct.pack("<I", 0x4C485447) + uvarint(2) + uvarint(2)
    p += session + key + pstr(b"claimer") + pstr(b"evil") + uvarint(1)
    p += uvarint(0) + pstr(b"0") + uvarint(0) + pstr(b"")
    return struct.pack("<IB", len(p), 1) + p


def read_frame(sock, bound):
    """(type, payload) of the next frame, or None on close/timeout."""
    buf = b""
    t0 = time.monotonic()
    sock.settimeout(0.5)
    while time.monotonic() - t0 < bound:
        if len(buf) >= 5:
            n, t = struct.unpack("<IB", buf[:5])
            if len(buf) >= 5 + n:
                return t, buf[5:5 + n]
        try:
            b = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return None
        if not b:
            return None
        buf += b
    return None


def claim_attack(a, h, deadline, bound):
    while time.monotonic() < deadline:
        r = http_request(h, b"GET /v1/agents HTTP/1.1\r\nHost: t\r\n"
                         b"Connection: close\r\n\r\n", 10) or b""
        body = r.split(b"\r\n\r\n", 1)[-1]
        try:
            ids = [x["session"] for x in json.loads(body)["agents"]]
        except (ValueError, KeyError, TypeError):
            ids = []
        if not ids:
            time.sleep(0.5)
            continue
        sid = ids[int.from_bytes(os.urandom(2), "little") % len(ids)]
        s = connect(a)
        if s is None:
            time.sleep(0.2)
            continue
        bump("agent_claim")
        try:
            s.sendall(hello_v2(bytes.fromhex(sid), os.urandom(16)))
        except OSError:
            pass
        f = read_frame(s, bound)
        # ERROR payload: uvarint code (7020 = AUTH is 0xec 0x36), has_gen...
        if f is not None and f[0] == 7 and f[1][:2] == uvarint(7020):
            ok, took = wait_closed(s, bound)
            if ok:
                bump("agent_claim_refused")
            else:
                problem("claim: connection open after AUTH")
        elif f is not None and f[0] == 2:
            problem("claim of session %s was welcomed" % sid)
        else:
            problem("claim of session %s: %r" % (sid, f))
        s.close()
        time.sleep(0.1)


def http_request(a, raw, bound):
    s = connect(a)
    if s is None:
        return None
    try:
        s.sendall(raw)
    except OSError:
        s.close()
        return b""
    buf = b""
    t0 = time.monotonic()
    s.settimeout(0.5)
    while time.monotonic() - t0 < bound:
        try:
            b = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not b:
            break
        buf += b
    s.close()
    return buf


def http_garbage(a, deadline):
    while time.monotonic() < deadline:
        bump("http_garbage")
        r = http_request(a, b"\x00\x01\x02 NOT HTTP\r\n\x7f\xff\r\n\r\n", 10)
        if r is None:
            time.sleep(0.2)
            continue
        if r == b"" or r.startswith(b"HTTP/1.1 4") or r.startswith(b"HTTP/1.0 4"):
            bump("http_garbage_refused")
        else:
            problem("http garbage answered: %r" % r[:60])
        time.sleep(0.1)


def http_badparam(a, deadline):
    while time.monotonic() < deadline:
        bump("http_badparam")
        r = http_request(a, b"GET /v1/trace?service=x&from=banana HTTP/1.1\r\n"
                         b"Host: t\r\nConnection: close\r\n\r\n", 10)
        if r is None:
            time.sleep(0.2)
            continue
        if r.startswith(b"HTTP/1.1 400") and b'"error"' in r:
            bump("http_badparam_400")
        else:
            problem("bad parameter answered: %r" % r[:80])
        time.sleep(0.1)


def slowloris(a, deadline):
    while time.monotonic() < deadline:
        s = connect(a)
        if s is None:
            time.sleep(0.5)
            continue
        bump("http_slowloris")
        t0 = time.monotonic()
        req = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 10000
        cut = False
        for c in req:
            if time.monotonic() >= deadline:
                break
            try:
                s.send(bytes([c]))
            except OSError:
                cut = True
                break
            time.sleep(0.3)
        if cut:
            bump("http_slowloris_cut")
            note_max("http_slowloris_cut_s", time.monotonic() - t0)
        s.close()


def slowreader(a, query, deadline):
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.connect(a)
        except OSError as e:
            problem("slowreader connect: %s" % e)
            s.close()
            time.sleep(0.5)
            continue
        bump("http_slowreader")
        s.sendall(("GET /v1/trace?%s HTTP/1.1\r\nHost: t\r\n"
                   "Connection: close\r\n\r\n" % query).encode())
        s.settimeout(1)
        got = 0
        t0 = time.monotonic()
        ended = False
        while time.monotonic() < deadline:
            try:
                b = s.recv(256)
            except socket.timeout:
                continue
            except OSError:
                ended = True
                break
            if not b:
                ended = True
                break
            got += len(b)
            time.sleep(0.2)
        bump("http_slowreader_bytes", got)
        if ended:
            bump("http_slowreader_ended")
            note_max("http_slowreader_end_s", time.monotonic() - t0)
        s.close()


def main():
    if len(sys.argv) < 4:
        sys.stderr.write(__doc__)
        return 2
    ag, ht, secs = addr(sys.argv[1]), addr(sys.argv[2]), float(sys.argv[3])
    query = sys.argv[4] if len(sys.argv) > 4 else "from=0&to=now"
    bound = float(os.environ.get("HOSTILE_CLOSE_BOUND", "15"))
    deadline = time.monotonic() + secs
    ths = []
    for kind in ("garbage", "oversized", "truncated", "silent"):
        ths.append(threading.Thread(target=agent_attack,
                                    args=(kind, ag, deadline, bound)))
    ths.append(threading.Thread(target=claim_attack,
                                args=(ag, ht, deadline, bound)))
    ths.append(threading.Thread(target=http_garbage, args=(ht, deadline)))
    ths.append(threading.Thread(target=http_badparam, args=(ht, deadline)))
    for _ in range(4):
        ths.append(threading.Thread(target=slowloris, args=(ht, deadline)))
    for _ in range(2):
        ths.append(threading.Thread(target=slowreader,
                                    args=(ht, query, deadline)))
    for t in ths:
        t.daemon = True
        t.start()
    for t in ths:
        t.join(secs + bound + 15)
    with lock:
        line = " ".join("%s=%s" % kv for kv in sorted(stats.items()))
        print("HOSTILE " + line)
        for p in problems:
            print("HOSTILE-PROBLEM " + p)
        bad = bool(problems)
    sys.stdout.flush()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
