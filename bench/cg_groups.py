#!/usr/bin/env python3
"""cg_groups.py FILE gentraced|bare: a server loop thread's instructions per
small generation, by function group, from one callgrind file (one thread,
bench/fleet_cg.sh writes them).

A group is a set of call-graph edges (caller -> callee: the inclusive cost
of those calls) and functions (inclusive cost); "syscalls and libuv" is
what the thread spent outside every group: libuv's own code (epoll loop,
stream reads, timers' bookkeeping) and the user-space side of the read,
write and epoll_wait wrappers. Per generation = divided by the generations
read in the file (calls of reasm_gen_end; bare: of gtp_frame_gen_end_decode)
for the read-path groups, by the ACKs written (ingest_send_ack; bare:
gtp_frame_ack_encode) for the completion-path groups: the window cuts the
two streams at different generations. "sum of the groups" adds those; the
"total" divides the whole thread by the reads (the same when the window
holds as many ACKs as reads).

uv__async_io's own cost is left out and printed apart: libuv 1.44 spins
there (uv__async_spin) while the store thread is inside uv_async_send, and
under valgrind, which runs one thread at a time, that spin is long; on the
real machine it is rare. Since the completions come back on an eventfd of
their own (daemon/donelist.c) there is no such spin: it prints 0.
"""
import collections
import re
import sys

path, kind = sys.argv[1], sys.argv[2]
names = {}


def name(s):
    m = re.match(r'\((\d+)\)(?: (.*))?', s)
    if not m:
        return s
    if m.group(2) is not None:
        names[m.group(1)] = m.group(2)
    return names.get(m.group(1), s)


own = collections.Counter()
edge = collections.Counter()
calls = collections.Counter()
fn = cfn = None
ncalls = None
with open(path) as f:
    for line in f:
        line = line.rstrip('\n')
        if line.startswith('fn='):
            fn = name(line[3:])
        elif line.startswith('cfn='):
            cfn = name(line[4:])
        elif line.startswith('calls='):
            ncalls = int(line[6:].split()[0])
        elif line and (line[0].isdigit() or line[0] in '+-*'):
            p = line.split()
            if len(p) < 2:
                continue
            if ncalls is not None:
                edge[(fn, cfn)] += int(p[1])
                calls[cfn] += ncalls
                ncalls = None
            else:
                own[fn] += int(p[1])


def incl(f):
    return own[f] + sum(v for (a, b), v in edge.items() if a == f and b != f)


def e(a, b):
    return edge[(a, b)]


total = sum(own.values())
G = collections.OrderedDict()
spin = 0
if kind == 'gentraced':
    # The completion callback: ingest_commit_poll since the store's
    # completions come back on daemon/donelist.c's eventfd; before that
    # ingest_commit_async, a uv_async_t callback. uv__async_io has no
    # symbol in Debian's libuv: it is the caller of ingest_commit_async.
    cb = ('ingest_commit_poll' if calls['ingest_commit_poll']
          else 'ingest_commit_async')
    async_io = ''
    if cb == 'ingest_commit_async':
        async_io = next((a for (a, b) in edge if b == cb), '')
        spin = own[async_io]
    nread, nack = calls['reasm_gen_end'], calls['ingest_send_ack']
    crc = incl('gtp_crc32c')
    G['frame decode and CRC'] = (
        incl('gtp_frame_decoder_feed') + e('reasm_batch', 'gtp_frame_batch_decode')
        + e('reasm_gen_end', 'gtp_frame_gen_end_decode') + crc
        + own['ingest_conn_input'] + own['conn_handle_frame']
        + incl('ingest_conn_account_decoder') + own['ingest_read_cb'], 'r')
    G['generation validation (parse without CRC, gtp_gen_fini)'] = (
        incl('gtp_gen_parse_lazy') + incl('gtp_gen_parse')
        + incl('gtp_gen_parse_known') + incl('gtp_gen_verify_known') - crc
        + incl('gtp_gen_fini'), 'r')
    G['reassembly and generation buffers (GEN_START/GEN_END, genpool)'] = (
        incl('reasm_batch') - e('reasm_batch', 'gtp_frame_batch_decode')
        + own['reasm_gen_end'] + e('reasm_gen_end', 'gtp_put_gen_end')
        + sum(v for (a, b), v in edge.items()
              if a == 'reasm_gen_end' and b.startswith('0x'))  # free()
        + e('reasm_gen_end', 'budget_gen_sync')
        + e('reasm_gen_end', 'budget_gen_queue')
        + e('reasm_gen_end', 'budget_ident_copy_bytes')
        + e('ingest_conn_input', 'reasm_stage_begin')
        + e(cb, 'genpool_release')
        + e(cb, 'ingest_conn_dequeue'), 'r')
    G['session lookup'] = (
        incl('store_index_bind_key') + incl('session_auth_gen_check')
        + incl('session_auth_gen_ok'), 'r')
    # Split by side, so that each is divided by its own count.
    G['hand-off to the store thread (store_gen, submit)'] = (
        e('reasm_gen_end', 'strdup') + e('reasm_gen_end', 'calloc')
        + e('reasm_gen_end', 'ingest_pending_new')
        + incl('storage_submit') - incl('store_index_bind_key'), 'r')
    G['hand-off back (completion, frees)'] = (
        (incl(async_io) - spin - incl(cb) if async_io else 0)
        + own[cb] + e(cb, 'donelist_take') + e(cb, 'ingest_done_pending')
        + e(cb, 'store_gen_free') + e(cb, 'ingest_pending_free')
        + e(cb, 'ingest_conn_unref')
        + sum(v for (a, b), v in edge.items()
              if a == cb and
              (b.startswith('0x') or b.startswith('pthread_mutex')))
        + e(cb, 'ingest_drain_check'), 'a')
    G['ACK write'] = (incl('ingest_send_ack'), 'a')
    G['timers and heartbeats'] = (incl('on_sweep'), 'r')
    G['metrics and logging'] = (
        e(cb, 'acklat_add')
        + e('reasm_gen_end', 'uv_hrtime') + e(cb, 'uv_hrtime')
        + sum(incl(f) for f in own if f.startswith('log_')), 'a')
    G['buffer budget and read pausing'] = (
        incl('ingest_update_pause') + incl('ingest_conn_update_reading')
        + e(cb, 'budget_used'), 'r')
    G['read buffer (alloc callback)'] = (incl('ingest_read_alloc'), 'r')
else:
    nread, nack = calls['gtp_frame_gen_end_decode'], calls['gtp_frame_ack_encode']
    G['frame decode and CRC'] = (
        incl('gtp_frame_decoder_feed') + e('on_read', 'gtp_frame_gen_end_decode')
        + own['on_read'], 'r')
    G['ACK write'] = (e('on_read', 'reply') + e('on_read', 'gtp_frame_ack_encode'), 'a')
    G['read buffer (alloc callback)'] = (incl('on_alloc'), 'r')
if nread == 0 or nack == 0:
    sys.exit('cg_groups: no generations in ' + path)
rest = total - spin - sum(v for v, _ in G.values())
print(f'{kind} {path}: loop thread {total} Ir; generations read {nread}, '
      f'ACKed {nack}; uv__async_io spin left out: {spin}')
print(f'  {"syscalls and libuv":<66} {rest / nread:8.0f}')
for k, (v, w) in G.items():
    print(f'  {k:<66} {v / (nread if w == "r" else nack):8.0f}')
print(f'  {"total per generation":<66} {(total - spin) / nread:8.0f}')
# The total above divides everything by the reads; when the window holds
# far fewer ACKs than reads (a loaded machine starves the store thread
# under valgrind) the completion path is undercounted. The sum of the
# groups, each by its own count, does not depend on that skew.
print(f'  {"sum of the groups, each per its own count":<66} '
      f'{rest / nread + sum(v / (nread if w == "r" else nack) for v, w in G.values()):8.0f}')
print('  calls per generation: ' + ', '.join(
    f'{s.split("@")[0]} {calls[s] / nread:.2f}' for s in
    ('epoll_wait', 'read', 'write', 'pthread_cond_signal@@GLIBC_2.3.2',
     'malloc', 'calloc', 'strdup', 'free')))
