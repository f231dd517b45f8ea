// fmt.js: pure formatting of times, durations, sizes and counts for the
// dashboard. No DOM, no globals: importable in Node (tests/dashboard).
'use strict';

export function pad(n, w = 2) {
  return String(n).padStart(w, '0');
}

// "03:12:07.250" in local time, for axes and tables.
export function fmtClock(ms, digits = 3) {
  const d = new Date(ms);
  let s = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (digits > 0) s += '.' + pad(d.getMilliseconds(), 3).slice(0, digits);
  return s;
}

export function fmtDateTime(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${fmtClock(ms)}`;
}

// "4s ago", "3m ago", "2h ago", "5d ago".
export function fmtAgo(ms, nowMs) {
  const s = Math.max(0, (nowMs - ms) / 1000);
  if (s < 1) return 'now';
  if (s < 90) return Math.round(s) + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  if (s < 172800) return Math.round(s / 3600) + 'h ago';
  return Math.round(s / 86400) + 'd ago';
}

// Durations given in milliseconds: "850 ns", "12.5 µs", "3.20 ms", "1.50 s".
export function fmtDur(ms) {
  const a = Math.abs(ms);
  if (a < 0.001) return (ms * 1e6).toFixed(0) + ' ns';
  if (a < 1) return (ms * 1e3).toPrecision(3) + ' µs';
  if (a < 1000) return ms.toPrecision(3) + ' ms';
  if (a < 120000) return (ms / 1000).toPrecision(3) + ' s';
  return (ms / 60000).toFixed(1) + ' min';
}

export function fmtBytes(n) {
  if (!Number.isFinite(n)) return '–';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) {
    n /= 1000;
    i++;
  }
  return (i ? n.toPrecision(3) : String(Math.round(n))) + ' ' + u[i];
}

export function fmtCount(n) {
  if (!Number.isFinite(n)) return '–';
  if (Math.abs(n) < 1000) return String(Math.round(n));
  const u = ['', 'k', 'M', 'G', 'T'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) {
    n /= 1000;
    i++;
  }
  return n.toPrecision(3) + u[i];
}

