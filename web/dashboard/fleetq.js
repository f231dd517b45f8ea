// fleetq.js: the fleet's pure rules (no DOM): which sessions are listed,
// their state, the time range of an ended session and the window a link
// opens for it. Tested in Node (tests/dashboard/fleetq.test.mjs); fleet.js
// and session.js draw.
//
// A session comes from /v1/agents (every session the store knows, also
// after retention deleted all its generations) and from the feed (it
// committed a generation). It is listed while it is connected or while any
// of its generations is retained: an ended session stays, greyed, with its
// time range, until retention has removed its last generation.
'use strict';

import { fmtClock, fmtDateTime, fmtDur } from './fmt.js';

// A session that committed nothing for this long while "connected" is
// shown as stalled (amber): connected but not flowing.
export const STALE_MS = 5000;

// s: a FleetStore session record (store.js).
export function listed(s) {
  if (s.connected) return true;
  // Known only from the feed so far: it has just committed a generation.
  if (!s.fromAgents) return true;
  return (s.generations || 0) > 0;
}

// 'connected' | 'stalled' | 'ended'
export function sessionState(s, nowMs) {
  if (!s.connected) return 'ended';
  return nowMs - s.lastSeenMs > STALE_MS ? 'stalled' : 'connected';
}

// The session's time range in ms: from its first contact (or its process
// start, or its oldest generation seen) to its last (null while connected).
export function lifeRange(s) {
  const from = s.firstSeenMs || s.startedMs || s.oldestMs || null;
  return { fromMs: from, toMs: s.connected ? null : s.lastSeenMs || null };
}

// "12:01:03 – 12:15:45, 14.7 min" (dates shown when the ends are not on
// the day of nowMs).
export function fmtRange(fromMs, toMs, nowMs) {
  const day = (ms) => new Date(ms).toDateString();
  const today = day(nowMs);
  const at = (ms) => (day(ms) === today ? fmtClock(ms, 0) : fmtDateTime(ms).slice(0, 19));
  if (!fromMs && !toMs) return '';
  if (!toMs) return 'since ' + at(fromMs);
  if (!fromMs) return 'until ' + at(toMs);
  return `${at(fromMs)} – ${day(toMs) === day(fromMs) && day(fromMs) !== today ? fmtClock(toMs, 0) : at(toMs)}, ${fmtDur(Math.max(0, toMs - fromMs))}`;
}

// The "last N seconds" window of a session, as unix ns BigInts: up to now
// while it is connected, up to its last contact once it ended (a window up
// to now would hold nothing).
export function lastWindow(s, nowMs, seconds) {
  const endMs = s.connected || !s.lastSeenMs ? nowMs : Math.min(nowMs, s.lastSeenMs + 1);
  const to = BigInt(Math.round(endMs)) * 1000000n;
  return { from: to - BigInt(seconds) * 1000000000n, to };
}

// Row order within a service: connected first (by host, then pid), then
// ended ones, the most recently seen first.
export function compareSessions(a, b) {
  if (a.connected !== b.connected) return a.connected ? -1 : 1;
  if (!a.connected) return (b.lastSeenMs || 0) - (a.lastSeenMs || 0) || String(a.session).localeCompare(String(b.session));
  return String(a.host).localeCompare(String(b.host)) || (a.pid - b.pid);
}
