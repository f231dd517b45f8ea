// perfetto.js: opens a window's Chrome JSON in the Perfetto UI with its
// postMessage handshake (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui):
// open ui.perfetto.dev, PING it until it answers PONG (its page needs time to
// load and install the listener), then post {perfetto: {buffer, title}}.
// When the UI does not answer within GIVE_UP_MS (no internet, blocked), the
// caller falls back to downloading the window as a .pftrace file.
'use strict';

export const PERFETTO_ORIGIN = 'https://ui.perfetto.dev';
const PING_EVERY_MS = 50;
// Its page answers within a second or two when it can load at all.
const GIVE_UP_MS = 8000;

// Must be called from a user gesture (a click), or the popup is blocked.
// Resolves once the trace is posted; rejects if Perfetto does not answer.
export function openInPerfetto(buffer, title, origin = PERFETTO_ORIGIN) {
  return new Promise((resolve, reject) => {
    const win = window.open(origin + '/#!/');
    if (!win) {
      reject(new Error('the browser blocked the Perfetto window (allow pop-ups for this page to open it directly)'));
      return;
    }
    let timer = null;
    let deadline = null;
    const done = () => {
      clearInterval(timer);
      clearTimeout(deadline);
      window.removeEventListener('message', onMessage);
    };
    function onMessage(e) {
      // Only Perfetto's own window may complete the handshake.
      if (e.origin !== origin || e.source !== win || e.data !== 'PONG') return;
      done();
      // The buffer is cloned, not transferred: the page keeps its copy for
      // a second try or the viewer.
      win.postMessage({ perfetto: { buffer, title, url: location.href } }, origin);
      resolve();
    }
    window.addEventListener('message', onMessage);
    timer = setInterval(() => {
      if (win.closed) {
        done();
        reject(new Error('the Perfetto window was closed'));
        return;
      }
      win.postMessage('PING', origin);
    }, PING_EVERY_MS);
    deadline = setTimeout(() => {
      done();
      try { win.close(); } catch (_) { /* not ours to close any more */ }
      reject(new Error('the Perfetto UI did not load (no internet?)'));
    }, GIVE_UP_MS);
  });
}
