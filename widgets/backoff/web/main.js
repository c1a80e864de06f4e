// The backoff widget: controls for clients, base, cap and strategy; the
// contention simulation (Rust, compiled to wasm) reruns on every input and the
// chart of calls over time is redrawn. Plain DOM and canvas, no network.
import init, { simulate, compare, header_fields, strategy_names } from './widget_backoff.js';
import { drawAndFollowTheme, element, fieldIndex, formatMs, prepareCanvas, start, slider as kitSlider } from './widget-kit.js';

const BUCKETS = 120;

const state = window.__backoffWidget = {
  ready: false,
  redraws: 0,
  lastRedrawMs: NaN,
  redrawTimesMs: [],
};

const slider = (...args) => kitSlider('backoff-control', ...args);

// Colours follow the mdBook theme: read the page's own CSS variables.
function themeColours(root) {
  const style = getComputedStyle(root);
  const read = (name, fallback) => (style.getPropertyValue(name) || '').trim() || fallback;
  return {
    fg: read('--fg', '#333'),
    bg: read('--bg', '#fff'),
    grid: read('--table-border-color', '#ccc'),
    bar: read('--links', '#4183c4'),
  };
}

// A round step for about `parts` ticks over `range`: 1, 2 or 5 times a power of ten.
function niceStep(range, parts) {
  const rough = Math.max(range / parts, 1e-9);
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => candidate >= rough);
  return step;
}

// `header`: where each total sits in `flat` (`fieldIndex` of the names the
// wasm exports); the histogram follows it.
function draw(canvas, flat, header, strategyName, colours) {
  const { context, width, height } = prepareCanvas(canvas, 640, 260, colours.bg);

  const left = 48, right = 12, top = 30, bottom = 34;
  const plotWidth = width - left - right, plotHeight = height - top - bottom;
  const counts = flat.subarray(header.length);
  let most = 1;
  for (const count of counts) most = Math.max(most, count);
  // The y axis ends on a round number of calls, so its ticks are round too.
  const yStep = Math.max(1, niceStep(most, 4));
  const yTicks = Math.ceil(most / yStep);
  const highest = yStep * yTicks;
  const span = flat[header.span_ms];

  context.strokeStyle = colours.grid;
  context.fillStyle = colours.fg;
  context.font = '12px sans-serif';
  context.lineWidth = 1;
  context.textAlign = 'right';
  context.textBaseline = 'middle';
  for (let tick = 0; tick <= yTicks; tick++) {
    const y = top + plotHeight - (plotHeight * tick) / yTicks;
    context.beginPath();
    context.moveTo(left, y);
    context.lineTo(left + plotWidth, y);
    context.stroke();
    context.fillText(String(yStep * tick), left - 6, y);
  }
  // Round times on the x axis; a label too close to the right edge is
  // right-aligned so it is never cut off.
  context.textBaseline = 'top';
  const xStep = niceStep(span, 5);
  for (let at = 0; at <= span + 1e-9; at += xStep) {
    const x = left + (plotWidth * at) / span;
    const label = formatMs(at);
    const half = context.measureText(label).width / 2;
    context.textAlign = x + half > width - 2 ? 'right' : 'center';
    context.fillText(label, Math.min(x, width - 2), top + plotHeight + 6);
  }
  context.textAlign = 'left';
  context.fillText(`calls in each ${formatMs(span / counts.length)} slice of time, ${strategyName}`, left, 4);

  context.fillStyle = colours.bar;
  const barWidth = plotWidth / counts.length;
  for (let index = 0; index < counts.length; index++) {
    const barHeight = (plotHeight * counts[index]) / highest;
    context.fillRect(left + index * barWidth, top + plotHeight - barHeight, Math.max(barWidth - 0.5, 0.5), barHeight);
  }
}

async function main() {
  const root = document.getElementById('widget-backoff');
  if (!root) return;
  await init();
  const header = fieldIndex(header_fields().split(','));
  const names = strategy_names().split(',');

  const clients = slider('clients', 'Clients', 10, 300, 10, 100, '');
  const base = slider('base', 'Base', 1, 100, 1, 5, ' ms');
  const cap = slider('cap', 'Cap', 50, 5000, 50, 2000, ' ms');
  const strategy = element('select', { name: 'strategy', 'aria-label': 'Strategy' },
    names.map((name, index) => {
      const option = element('option', { value: String(index) }, [name]);
      if (name === 'exponential') option.selected = true;
      return option;
    }));
  const seed = element('input', { type: 'number', name: 'seed', min: 1, max: 1000000, value: 1, 'aria-label': 'Seed' });
  const canvas = element('canvas', { class: 'backoff-chart', role: 'img', 'aria-label': 'Calls over time' });
  canvas.style.width = '100%';
  canvas.style.height = '260px';
  canvas.style.display = 'block';
  const totals = element('p', { class: 'backoff-totals', 'aria-live': 'polite' });
  const table = element('table', { class: 'backoff-compare' });

  const controls = element('div', { class: 'backoff-controls' }, [
    clients.row, base.row, cap.row,
    element('label', { class: 'backoff-control' }, ['Strategy ', strategy]),
    element('label', { class: 'backoff-control' }, ['Seed ', seed]),
  ]);
  // Inline layout, so the widget needs no stylesheet of its own: controls
  // wrap on narrow pages, with room between them.
  Object.assign(controls.style, { display: 'flex', flexWrap: 'wrap', gap: '0.4em 1.5em', alignItems: 'center', margin: '0.5em 0' });
  seed.style.width = '6em';
  // Form controls take the theme's colours, so they are readable in the dark themes.
  for (const field of [strategy, seed]) {
    Object.assign(field.style, {
      background: 'var(--bg)', color: 'var(--fg)',
      border: '1px solid var(--searchbar-border-color, #888)', borderRadius: '3px', padding: '0.1em 0.3em',
    });
  }
  root.replaceChildren(controls, canvas, totals, table);

  const rerun = (event) => {
    const params = [Number(clients.input.value), Number(base.input.value), Number(cap.input.value)];
    const seedValue = Math.max(1, Number(seed.value) | 0);
    const chosen = Number(strategy.value);
    const flat = simulate(...params, chosen, seedValue, BUCKETS, 0);
    draw(canvas, flat, header, names[chosen], themeColours(root));
    totals.textContent =
      `${names[chosen]}: ${flat[header.calls]} calls (${flat[header.failures]} lost), ` +
      `every client done after ${Math.round(flat[header.completion_ms])} ms` +
      (flat[header.truncated] ? ' (stopped at the call limit)' : '');
    const everyStrategy = compare(...params, seedValue);
    const rows = names.map((name, index) => element('tr', {}, [
      element('td', {}, [name]),
      element('td', {}, [String(everyStrategy[2 * index])]),
      element('td', {}, [`${Math.round(everyStrategy[2 * index + 1])} ms`]),
    ]));
    table.replaceChildren(
      element('thead', {}, [element('tr', {}, [
        element('th', {}, ['strategy']), element('th', {}, ['calls']), element('th', {}, ['all done']),
      ])]),
      element('tbody', {}, rows),
    );
    // Input event to chart and totals redrawn (the canvas calls are done;
    // the browser paints them at its next frame).
    if (event && Number.isFinite(event.timeStamp)) {
      state.lastRedrawMs = performance.now() - event.timeStamp;
      state.redrawTimesMs.push(state.lastRedrawMs);
    }
    state.redraws += 1;
  };

  for (const control of [clients.input, base.input, cap.input, seed]) control.addEventListener('input', rerun);
  strategy.addEventListener('change', rerun);
  // The theme can change under us (mdBook's theme menu): redraw with its colours.
  drawAndFollowTheme(state, rerun);
}

start(state, 'backoff', main);
