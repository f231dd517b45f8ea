// store.js: what the dashboard knows about the fleet, kept current from two
// API calls: /v1/agents (identity, connection state, totals; polled) and
// /v1/feed (every committed generation, long-polled, in commit order).
//
// Invariants:
//  1. The feed cursor MUST only ever be a value the server returned (it is
//     opaque, docs/HTTP.md), otherwise generations are skipped or repeated.
//  2. Per-session recent generations MUST stay bounded (RECENT_MAX) and be
//     kept sorted by gen, otherwise a long-open tab grows without limit and
//     the timeline draws out of order after a resend.
//  3. One feed loop and one agents poll at a time (start() is idempotent),
//     otherwise a re-render would multiply the requests.
'use strict';

import { getJSON, nsToMs, serverNowMs, noteServerDate } from './api.js';

const RECENT_MAX = 3600; // generations kept per session (1 h at 1 s periods)
const RATE_WINDOW_MS = 10000; // events/s and bytes/s are averaged over this
const AGENTS_POLL_MS = 5000;
const FEED_WAIT_S = 25; // below the daemon's 30 s idle timeout + wait
const CATCHUP_LIMIT = 10000; // the feed's largest page
// The feed starts this far back: enough for the rates (RATE_WINDOW_MS) and a
// first stretch of every timeline; older history comes per session from
// /v1/agents/{id}/generations when a session is opened, never by replaying
// everything a fleet has retained (days of generations).
const FEED_SINCE = '-60s';

export class FleetStore {
  constructor() {
    this.sessions = new Map(); // session id -> session record
    this.cursor = null; // none until the first answer (invariant 1)
    // 'starting' | 'catching-up' | 'live' | 'error'
    this.feedState = 'starting';
    this.feedError = '';
    this.agentsError = '';
    this.feedGens = 0; // generations seen through the feed since load
    this.listeners = new Set();
    this.started = false;
    this.pendingEmit = false;
  }

  // Calls fn(kind) on 'agents' and 'feed' changes; returns an unsubscribe.
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(kind, gens) {
    for (const fn of [...this.listeners]) {
      try {
        fn(kind, gens);
      } catch (e) {
        console.error(e);
      }
    }
  }

  session(id) {
    let s = this.sessions.get(id);
    if (!s) {
      s = {
        session: id, service: '', host: '', pid: 0, tags: {}, connected: false,
        startedMs: 0, lastSeenMs: 0, generations: 0, events: 0, bytes: 0,
        lost: 0, recent: [], fromAgents: false,
      };
      this.sessions.set(id, s);
    }
    return s;
  }

  start() {
    if (this.started) return; // invariant 3
    this.started = true;
    this.pollAgents();
    this.followFeed();
  }

  async pollAgents() {
    for (;;) {
      await this.refreshAgents();
      await sleep(AGENTS_POLL_MS);
    }
  }

  async refreshAgents() {
    try {
      const { json, headers } = await getJSON('/v1/agents');
      noteServerDate(headers);
      const seen = new Set();
      for (const a of json.agents || []) {
        const s = this.session(a.session);
        seen.add(a.session);
        s.fromAgents = true;
        s.service = a.service;
        s.host = a.host;
        s.pid = a.pid;
        s.tags = a.tags || {};
        s.connected = !!a.connected;
        s.startedMs = nsToMs(a.started_ns);
        s.firstSeenMs = nsToMs(a.first_seen_ns);
        s.lastSeenMs = Math.max(s.lastSeenMs, nsToMs(a.last_seen_ns));
        s.generations = a.generations;
        s.firstGen = a.first_gen;
        s.lastGen = a.last_gen;
        s.events = a.events;
        s.bytes = a.bytes;
        s.lost = a.lost;
        s.agentVersion = a.agent_version;
        s.rejected = a.rejected_generations || 0;
      }
      // Sessions retention removed entirely are gone from the store too.
      for (const [id, s] of this.sessions)
        if (s.fromAgents && !seen.has(id)) this.sessions.delete(id);
      this.agentsError = '';
      this.agentsLoaded = true; // a session not listed now is really not known
    } catch (e) {
      this.agentsError = String(e.message || e);
    }
    this.emit('agents');
  }

  // Follows /v1/feed forever. The first request starts FEED_SINCE back
  // (since=), later ones continue from the returned cursor; the view is
  // told once the catch-up pages are done.
  async followFeed() {
    let backoff = 1000;
    for (;;) {
      const caughtUp = this.feedState === 'live';
      const wait = caughtUp ? FEED_WAIT_S : 0;
      const limit = caughtUp ? 1000 : CATCHUP_LIMIT;
      try {
        const from = this.cursor === null
          ? `since=${encodeURIComponent(FEED_SINCE)}`
          : `after=${encodeURIComponent(this.cursor)}`;
        const { json, headers } = await getJSON(
          `/v1/feed?${from}&wait=${wait}&limit=${limit}`);
        noteServerDate(headers);
        const gens = json.generations || [];
        this.cursor = json.cursor; // invariant 1
        this.feedError = '';
        backoff = 1000;
        const fresh = this.addGens(gens, caughtUp);
        if (!caughtUp && gens.length < limit) this.feedState = 'live';
        else if (!caughtUp) this.feedState = 'catching-up';
        this.emit('feed', fresh);
      } catch (e) {
        this.feedState = this.feedState === 'live' ? 'live' : 'starting';
        this.feedError = String(e.message || e);
        this.emit('feed', []);
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 15000);
      }
    }
  }

  // Returns the generations worth telling views about.
  addGens(gens, live) {
    const horizon = serverNowMs() - 3600 * 1000;
    const fresh = [];
    let unknown = false;
    for (const g of gens) {
      const endMs = nsToMs(g.end_ns);
      if (!live && endMs < horizon) continue; // old replay: totals come from /v1/agents
      const s = this.session(g.session);
      if (!s.fromAgents) unknown = true;
      if (!s.service) {
        s.service = g.service;
        s.host = g.host;
      }
      const rec = {
        gen: g.gen, startMs: nsToMs(g.start_ns), endMs,
        start_ns: g.start_ns, end_ns: g.end_ns,
        events: g.events, bytes: g.bytes, lost: g.lost,
      };
      insertGen(s.recent, rec);
      if (!s.oldestMs || rec.startMs < s.oldestMs) s.oldestMs = rec.startMs;
      s.lastSeenMs = Math.max(s.lastSeenMs, endMs);
      if (live) {
        // The totals move with the feed between two /v1/agents polls.
        s.events += g.events;
        s.bytes += g.bytes;
        s.lost += g.lost;
        s.generations += 1;
        s.lastGen = g.gen;
        s.connected = true;
        this.feedGens++;
      }
      fresh.push({ ...rec, session: g.session });
    }
    // A session the agents list does not know yet: ask again now rather
    // than in up to 5 s, so its pid and state show up at once.
    if (unknown) this.refreshAgents();
    return fresh;
  }

  // Adds generations read from /v1/agents/{session}/generations (history
  // the feed replay skipped or that predates the page).
  mergeHistory(id, gens) {
    const s = this.session(id);
    const byGen = new Map(s.recent.map((g) => [g.gen, g]));
    for (const g of gens)
      if (!byGen.has(g.gen))
        byGen.set(g.gen, {
          gen: g.gen, startMs: nsToMs(g.start_ns), endMs: nsToMs(g.end_ns),
          start_ns: g.start_ns, end_ns: g.end_ns,
          events: g.events, bytes: g.bytes, lost: g.lost, status: g.status,
        });
    // One sort instead of an insertion per row (invariant 2).
    s.recent = [...byGen.values()].sort((a, b) => a.gen - b.gen).slice(-RECENT_MAX);
    this.emit('history', []);
  }

  // events/s, bytes/s and lost events over the last RATE_WINDOW_MS (by
  // generation end, server clock), plus lost over the last minute.
  rates(s, nowMs = serverNowMs()) {
    const from = nowMs - RATE_WINDOW_MS;
    let ev = 0, by = 0, lostMin = 0;
    for (let i = s.recent.length - 1; i >= 0; i--) {
      const g = s.recent[i];
      if (g.endMs < nowMs - 60000) break;
      lostMin += g.lost;
      if (g.endMs > from) {
        ev += g.events;
        by += g.bytes;
      }
    }
    // A session younger than the rate window is averaged over its age.
    const span = Math.max(1000, Math.min(RATE_WINDOW_MS, nowMs - (s.startedMs || from)));
    return { eventsPerS: (ev * 1000) / span, bytesPerS: (by * 1000) / span, lostMin };
  }
}

// Keeps recent sorted by gen and bounded (invariant 2). Generations nearly
// always arrive in order, so this is an append in practice.
function insertGen(recent, rec) {
  let i = recent.length;
  while (i > 0 && recent[i - 1].gen > rec.gen) i--;
  if (i > 0 && recent[i - 1].gen === rec.gen) recent[i - 1] = rec;
  else recent.splice(i, 0, rec);
  if (recent.length > RECENT_MAX) recent.splice(0, recent.length - RECENT_MAX);
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

export const fleet = new FleetStore();
