// lib.mjs: what the browser tests' drivers share: required environment
// variables and the PIDs of the browser they started (so the shell can
// stop it by PID if the driver dies without closing it).
import { readdirSync, readFileSync } from 'node:fs';

export function env(k) {
  const v = process.env[k];
  if (!v) throw new Error(`${k} not set`);
  return v;
}

// Children of this process (Playwright starts the browser in its own
// process group, as a child of this one).
export function browserPids() {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid) out.push(Number(d));
    } catch (_) {
      // The process ended while we looked.
    }
  }
  return out;
}
