#!/usr/bin/env python3
"""bench/wal_pages.py: the pages a store transaction rewrites, by B-tree.

    bench/wal_pages.py DB WAL [SKIP]

DB and WAL are copies of a gentraced database and its -wal file taken while
it ran (copy the database first, then the WAL; see bench/README.md). Every
committed transaction in the WAL is one run of frames ending in a commit
frame; this prints the frames (pages) per transaction and which table or
index each page belongs to (SQLite's dbstat table on DB), averaged over the
transactions after the first SKIP (default: a quarter, the start-up).
Page 1 is sqlite_schema's root and holds the header (rewritten whenever
the file grows); pages no B-tree owns are pointer-map pages (auto_vacuum)
or pages new since DB was copied.
A transaction's cost that does not depend on how many generations it holds
is mostly these pages: each is checksummed, written to the WAL and later
copied back by a checkpoint.
"""
import collections
import sqlite3
import struct
import sys


def transactions(wal):
    data = open(wal, 'rb').read()
    if len(data) < 32:
        return 0, []
    hdr = struct.unpack('>8I', data[:32])
    psz, salt = hdr[2], (hdr[4], hdr[5])
    off, cur, out = 32, [], []
    while off + 24 + psz <= len(data):
        pg, commit, s1, s2 = struct.unpack('>4I', data[off:off + 16])
        if (s1, s2) != salt:
            break  # frames of an earlier WAL generation: not this one's
        cur.append(pg)
        off += 24 + psz
        if commit:
            out.append(cur)
            cur = []
    return psz, out


def main():
    if len(sys.argv) < 3:
        sys.exit('usage: wal_pages.py DB WAL [SKIP]')
    psz, txs = transactions(sys.argv[2])
    skip = int(sys.argv[3]) if len(sys.argv) > 3 else len(txs) // 4
    con = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True)
    owner = {}
    for name, pageno, ptype in con.execute(
            'SELECT name, pageno, pagetype FROM dbstat'):
        owner[pageno] = name + (' (overflow)' if ptype == 'overflow' else '')
    use = txs[skip:]
    if not use:
        sys.exit('wal_pages: no committed transaction in the WAL')
    count = collections.Counter()
    for t in use:
        for p in t:
            count[owner.get(p, 'page 1 (header)' if p == 1 else
                            'pointer map or new')] += 1
    n = len(use)
    total = sum(count.values()) / n
    print('page size %d; %d transactions, %d counted; %.2f pages '
          '(%.1f KiB) per transaction' % (psz, len(txs), n, total,
                                          total * psz / 1024))
    for name, v in count.most_common():
        print('%8.2f  %s' % (v / n, name))


main()
