'use strict';
// The explorer's page: the check (from /.status, asked again every second
// until the check is done) and one path through the model (from /.path/...).
// The address names the path as the CLI prints it, #/steps/0/3/1 (the
// initial state, then action indices), and ?step=k selects its step k.

const $ = (id) => document.getElementById(id);

/// An element with attributes and children (strings become text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) {
    e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return e;
}

const number = (n) => Number(n).toLocaleString('en-US');

let status = null;   // the last /.status
let view = null;     // the /.path answer for the address's path
let selected = 0;    // the selected step of `view`
const paths = new Map(); // /.path answers by path, for next actions

async function getJson(url) {
  const r = await fetch(url, {cache: 'no-store'});
  if (!r.ok) throw new Error(await r.text());
  return r.json();
}

async function refreshStatus() {
  try {
    status = await getJson('/.status');
  } catch (e) {
    $('phase').textContent = 'the explorer does not answer (stopped?)';
    setTimeout(refreshStatus, 5000);
    return;
  }
  showStatus();
  if (!status.done) setTimeout(refreshStatus, 1000);
}

const ENDED = {
  'exhaustive': 'every reachable state was searched',
  'stopped-at-counterexample': 'stopped at the first counterexample (--exhaustive checks every property)',
  'limited': 'stopped by a time or state limit: not every state was searched',
  'interrupted': 'interrupted',
  'sampled': 'random walks: not exhaustive',
};
const OUTCOME = {
  'as-expected': 'every verdict is as expected',
  'not-as-expected': 'NOT as expected',
  'undecided': 'undecided: the run stopped before it could decide',
  'no-expectation': 'no expectation was given',
};

function showStatus() {
  $('title').textContent = status.title;
  const c = status.check;
  const figures = $('figures');
  figures.replaceChildren();
  if (!c) {
    $('phase').textContent = 'a saved trace: nothing was checked here';
    $('check-note').textContent = '';
  } else {
    $('phase').textContent = c.done ? 'done: ' + (ENDED[c.ended] || c.ended) : c.heading + '…';
    const p = c.progress;
    const rows = [
      ['seconds', p.seconds.toFixed(1)],
      ['states reached', number(p.states)],
      ['unique states', number(p.unique_states)],
      ['depth', number(p.max_depth)],
    ];
    if (p.recovery_states > 0) rows.push(['recovery states', number(p.recovery_states)]);
    if (c.percent !== null && c.percent !== undefined) {
      rows.push(['estimate', `~${c.percent.toFixed(0)}% of ${number(c.known_states)} (measured)`]);
    }
    for (const [k, v] of rows) figures.append(el('tr', {}, el('td', {}, k), el('td', {}, v)));
    let note = 'The check\'s own figures: states reached counts a state each time an action leads to it; '
      + 'unique states counts each once (symmetric states as one); depth is the longest shortest path.';
    if (c.done) {
      const outcome = OUTCOME[c.outcome] || c.outcome;
      note = outcome.charAt(0).toUpperCase() + outcome.slice(1) + '. ' + note;
      for (const m of c.mismatches) note += ' ' + m + '.';
    } else {
      note = 'The verdicts and their paths appear when the check ends; any path can be browsed meanwhile. ' + note;
    }
    $('check-note').textContent = note;
  }
  showProperties();
}

/// A verdict in words, and whether it is good news.
function verdictText(p) {
  switch (p.verdict) {
    case null: case undefined: return ['… checking', 'open'];
    case 'holds': return [p.kind === 'progress' ? '✓ can always heal' : '✓ holds', 'good'];
    case 'counterexample': return ['✗ counterexample', 'bad'];
    case 'reached': return ['✓ reached', 'good'];
    case 'not-reached': return ['✗ not reached', 'bad'];
    case 'none-found': return ['? none found', 'open'];
    case 'not-checked': return ['– not decided', 'open'];
    default: return [p.verdict, 'open'];
  }
}

function showProperties() {
  const list = $('properties');
  list.replaceChildren();
  const here = view ? view.steps[selected].path : null;
  for (const p of (status ? status.properties : [])) {
    const [text, mood] = verdictText(p);
    const li = el('li', {'data-property': p.name, 'data-verdict': p.verdict || 'checking'},
      el('span', {class: 'verdict ' + mood}, text), ' ', `${p.kind} "${p.name}"`);
    if (p.path) {
      li.append(' ', el('a', {href: '#/steps/' + p.path},
        `${p.what}, ${p.steps} step${p.steps === 1 ? '' : 's'}`));
      if (p.path === here) {
        li.classList.add('here');
        li.append(' (this step)');
      }
    }
    list.append(li);
  }
}

/// The address's path and selected step: `#/steps/0/3/1?step=2`.
function parseHash() {
  const hash = window.location.hash || '#/steps/0';
  const [route, query] = hash.slice(1).split('?');
  const parts = route.split('/').filter((s) => s !== '');
  if (parts[0] !== 'steps') return {path: '0', step: null};
  const path = parts.slice(1).join('/') || '0';
  const step = new URLSearchParams(query || '').get('step');
  return {path, step: step === null ? null : parseInt(step, 10)};
}

async function showHash() {
  const {path, step} = parseHash();
  if (!view || view.steps[view.steps.length - 1].path !== path) {
    try {
      view = await getJson('/.path/' + path);
      paths.set(path, view);
    } catch (e) {
      view = null;
      $('heading').textContent = 'no such path: ' + e.message;
      for (const id of ['broken', 'table']) $(id).textContent = '';
      for (const id of ['picture', 'path', 'next']) $(id).replaceChildren();
      return;
    }
  }
  const last = view.steps.length - 1;
  selected = step === null || isNaN(step) ? last : Math.max(0, Math.min(step, last));
  showPath();
  showStep();
  showProperties();
  await showNext();
}

const stepName = (s) => `step ${s.step}: ${s.action || 'initial state'}`;
const href = (k) => `#/steps/${view.steps[view.steps.length - 1].path}?step=${k}`;

function showPath() {
  const list = $('path');
  list.replaceChildren();
  for (const s of view.steps) {
    const mark = s.broken.length ? ' ✗' : '';
    list.append(el('li', {class: s.step === selected ? 'selected' : null},
      el('a', {href: href(s.step)}, stepName(s) + mark)));
  }
}

function showStep() {
  const s = view.steps[selected];
  $('heading').textContent = stepName(s);
  $('broken').textContent = s.broken.length ? 'Breaks: ' + s.broken.join(', ') : '';
  $('picture').innerHTML = s.svg;
  $('table').textContent = s.table;
}

/// The actions enabled at the selected step; the one the path takes next
/// is marked.
async function showNext() {
  const s = view.steps[selected];
  $('next-from').textContent = `(from step ${s.step})`;
  let at = paths.get(s.path);
  if (!at) {
    try {
      at = await getJson('/.path/' + s.path);
      paths.set(s.path, at);
    } catch (e) {
      $('next').replaceChildren(el('li', {}, 'cannot load: ' + e.message));
      return;
    }
  }
  const taken = selected < view.steps.length - 1 ? view.steps[selected + 1].path : null;
  const list = $('next');
  list.replaceChildren();
  for (const n of at.next) {
    if (n.path === null) {
      list.append(el('li', {title: 'the model ignores this action here'}, n.action + ' (no change)'));
    } else {
      list.append(el('li', {class: n.path === taken ? 'taken' : null},
        el('a', {href: '#/steps/' + n.path}, n.action), n.path === taken ? ' ← on this path' : ''));
    }
  }
}

document.addEventListener('keydown', (ev) => {
  if (!view) return;
  let k = selected;
  if (ev.key === 'ArrowUp' || ev.key === 'k') k -= 1;
  else if (ev.key === 'ArrowDown' || ev.key === 'j') k += 1;
  else return;
  ev.preventDefault();
  k = Math.max(0, Math.min(k, view.steps.length - 1));
  window.location.hash = href(k);
});

window.addEventListener('hashchange', showHash);
showHash();
refreshStatus();
