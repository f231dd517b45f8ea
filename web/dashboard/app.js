// app.js: the dashboard's entry point: hash routing and the status line.
//
//   #/                      fleet: services and their sessions (fleet.js)
//   #/?q=TEXT               the same, filtered
//   #/session/ID            one session's recent generations (session.js)
//   #/window?session=ID&from=NS&to=NS   (or service=&host=, or last=10s)
//                           a trace viewer for that window (window.js)
//   #/search?name=&min=&max=&last=&service=
//                           slow spans and latency histograms (search.js)
//   #/pins                  retention pins: list, delete (pins.js)
//
// Routes live in the hash so any view can be linked to and reloaded; the
// page's ?token= stays in location.search and is forwarded by api.js.
'use strict';

import { h } from './api.js';
import { fleet } from './store.js';
import { fleetView } from './fleet.js';
import { sessionView } from './session.js';
import { windowView } from './window.js';
import { searchView } from './search.js';
import { pinsView } from './pins.js';

const main = document.getElementById('view');
const crumbs = document.getElementById('crumbs');
const status = document.getElementById('status');
let current = null; // { dispose() } of the view on screen

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const qi = raw.indexOf('?');
  const path = qi < 0 ? raw : raw.slice(0, qi);
  const params = new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1));
  return { path, params };
}

function route() {
  if (current && current.dispose) current.dispose();
  current = null;
  main.textContent = '';
  crumbs.textContent = '';
  const { path, params } = parseHash();
  let m;
  try {
    if (path === '/' || path === '') {
      current = fleetView(main, params, crumbs);
    } else if ((m = /^\/session\/([0-9a-fA-F]{32})\/?$/.exec(path))) {
      current = sessionView(main, m[1].toLowerCase(), params, crumbs);
    } else if (path === '/window') {
      current = windowView(main, params, crumbs);
    } else if (path === '/search') {
      current = searchView(main, params, crumbs);
    } else if (path === '/pins') {
      current = pinsView(main, params, crumbs);
    } else {
      main.append(h('p.empty', null, 'No such view: ', path, '. ', h('a', { href: '#/' }, 'Back to the fleet')));
    }
  } catch (e) {
    console.error(e);
    main.append(h('p.error', null, String(e.message || e)));
  }
  document.body.dataset.view = path.split('/')[1] || 'fleet';
}

function showStatus() {
  const st = fleet.feedState;
  let text, cls;
  if (fleet.feedError) {
    text = 'feed: ' + fleet.feedError;
    cls = 'bad';
  } else if (st === 'live') {
    text = 'live';
    cls = 'ok';
  } else if (st === 'catching-up') {
    text = 'catching up with the feed…';
    cls = 'warn';
  } else {
    text = 'connecting…';
    cls = 'warn';
  }
  if (fleet.agentsError) {
    text += ' · agents: ' + fleet.agentsError;
    cls = 'bad';
  }
  status.textContent = text;
  status.className = 'status ' + cls;
  status.dataset.state = st;
}

window.addEventListener('hashchange', route);
fleet.subscribe(showStatus);
fleet.start();
showStatus();
route();
