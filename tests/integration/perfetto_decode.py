#!/usr/bin/env python3
"""perfetto_decode.py FILE: an independent decoder of the Perfetto protobuf
fields gentrace writes (Trace.packet; TracePacket timestamp, sequence id and
flags, track_event, track_descriptor; TrackEvent type, track_uuid, name,
categories, counter_value, debug_annotations; TrackDescriptor uuid, name,
parent_uuid, process, thread, counter). Checks the structure a reader needs
(every event's track described before it, slices balanced per track, one
sequence whose first packet clears incremental state) and prints counts as
JSON: {"slice_begin":N,"slice_end":N,"instant":N,"counter":N,
"processes":[names],"threads":N,"counter_tracks":[names],
"stacks":{event name: [frame names of its first "stack" annotation, an
array of strings]}}. Exits 1 with a message on any violation."""
import json
import sys


def varint(b, i):
    v = s = 0
    while True:
        if i >= len(b):
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, i
        if s > 63:
            raise ValueError("varint too long")


def fields(b):
    """Yields (field, wire, value) of one message; value is int or bytes."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if f == 0:
            raise ValueError("field 0")
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated bytes")
            v, i = b[i:i + n], i + n
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % w)
        yield f, w, v


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def main():
    data = open(sys.argv[1], "rb").read()
    out = {"slice_begin": 0, "slice_end": 0, "instant": 0, "counter": 0,
           "processes": [], "threads": 0, "counter_tracks": [], "stacks": {}}
    tracks = {}  # uuid -> kind
    depth = {}
    first = True
    last_ts = {}
    for f, w, pkt in fields(data):
        if f != 1 or w != 2:
            raise ValueError("Trace holds field %d, not packets" % f)
        p = {}
        for pf, pw, pv in fields(pkt):
            p.setdefault(pf, []).append(pv)
        if p.get(10) != [1]:
            raise ValueError("packet not on trusted sequence 1: %r" % p.get(10))
        flags = p.get(13, [0])[0]
        if first and not flags & 1:
            raise ValueError("first packet does not clear incremental state")
        first = False
        if 60 in p:
            td = dict()
            for tf, tw, tv in fields(p[60][0]):
                td.setdefault(tf, []).append(tv)
            uuid = td[1][0]
            if 3 in td:
                proc = {k: v for k, _, v in fields(td[3][0])}
                out["processes"].append(proc[6].decode())
                tracks[uuid] = "process"
            elif 4 in td:
                th = {k: v for k, _, v in fields(td[4][0])}
                if td.get(5, [None])[0] not in tracks:
                    raise ValueError("thread track before its process")
                if uuid not in tracks:
                    out["threads"] += 1
                tracks[uuid] = "thread"
                assert 2 in th, "thread without tid"
            elif 8 in td:
                tracks[uuid] = "counter"
                out["counter_tracks"].append(td[2][0].decode())
            else:
                raise ValueError("track descriptor of unknown kind")
        if 11 in p:
            te = {}
            for ef, ew, ev in fields(p[11][0]):
                te.setdefault(ef, []).append(ev)
            ts = p.get(8, [0])[0]
            if ts <= 0:
                raise ValueError("track event without timestamp")
            t = te[9][0]
            uuid = te[11][0]
            if uuid not in tracks:
                raise ValueError("event on undescribed track %x" % uuid)
            if t == 1:
                out["slice_begin"] += 1
                te[23][0].decode()
                depth[uuid] = depth.get(uuid, 0) + 1
            elif t == 2:
                out["slice_end"] += 1
                if depth.get(uuid, 0) == 0:
                    raise ValueError("slice end without begin")
                depth[uuid] -= 1
            elif t == 3:
                out["instant"] += 1
                te[23][0].decode()
            elif t == 4:
                out["counter"] += 1
                if tracks[uuid] != "counter":
                    raise ValueError("counter value on a non-counter track")
                signed(te[30][0])
            else:
                raise ValueError("event type %d" % t)
            for ann in te.get(4, []):
                a = {}
                for af, aw, av in fields(ann):
                    a.setdefault(af, []).append(av)
                if a.get(10, [b""])[0] != b"stack":
                    continue
                frames = []
                for el in a.get(12, []):
                    e = {k: v for k, _, v in fields(el)}
                    frames.append(e[6].decode())
                if not frames:
                    raise ValueError("empty stack annotation")
                out["stacks"].setdefault(te[23][0].decode(), frames)
            if ts < last_ts.get(uuid, 0) and t in (1, 2):
                raise ValueError("slices out of order on a track")
            last_ts[uuid] = ts
    if first:
        raise ValueError("no packets")
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    except (ValueError, KeyError, IndexError, AssertionError) as e:
        sys.stderr.write("perfetto_decode: %s\n" % e)
        sys.exit(1)
