// The overload widget: a service calls a fast and a flaky provider through a
// timeout, a concurrency limit (none, shared, or one per provider) and an
// optional circuit breaker. The simulation (Rust, compiled to wasm) reruns on
// every input; the timeline (the breaker's state, calls in flight at each
// provider, the fast provider's p99) is redrawn. Plain DOM and canvas, no network.
import init, {
  simulate, header_fields, total_fields, bucket_fields, failure_modes, limit_modes, breaker_states,
} from './widget_overload.js';
import { drawAndFollowTheme, element, fieldIndex, formatMs, prepareCanvas, start, slider as kitSlider, select as kitSelect } from './widget-kit.js';

const state = window.__overloadWidget = {
  ready: false,
  redraws: 0,
  lastRedrawMs: NaN,
  redrawTimesMs: [],
  last: null,
};

const slider = (...args) => kitSlider('overload-control', ...args);

const select = (...args) => kitSelect('overload-control', ...args);

// A y-axis title, written upwards along the left edge of `area`.
function sideLabel(context, text, area) {
  context.save();
  context.translate(12, area.top + area.height / 2);
  context.rotate(-Math.PI / 2);
  context.textAlign = 'center';
  context.fillText(text, 0, 0);
  context.restore();
}

// A field of the flat result by name: field lists come from the wasm, so the
// two sides cannot drift apart.
function reader(headerNames, totalNames, bucketNames) {
  const header = fieldIndex(headerNames);
  const totalIndex = fieldIndex(totalNames);
  const bucketIndex = fieldIndex(bucketNames);
  return (flat) => {
    const totals = flat[header.total_field_count], fields = flat[header.bucket_field_count];
    const buckets = flat[header.bucket_count], transitions = flat[header.transition_count];
    const bucketsAt = header.length + 2 * totals;
    const transitionsAt = bucketsAt + buckets * fields;
    return {
      bucketMs: flat[header.bucket_ms],
      durationMs: flat[header.duration_ms],
      window: [flat[header.window_start_ms], flat[header.window_end_ms]],
      buckets,
      total: (provider, name) => flat[header.length + (provider === 'flaky' ? totals : 0) + totalIndex[name]],
      bucket: (index, name) => flat[bucketsAt + index * fields + bucketIndex[name]],
      transitions: Array.from({ length: transitions }, (_, index) => [
        flat[transitionsAt + 2 * index], flat[transitionsAt + 2 * index + 1],
      ]),
    };
  };
}

// The page's colours, from mdBook's CSS variables, and series colours chosen
// for a light or a dark background by the background's own lightness.
function themeColours(root, context) {
  const style = getComputedStyle(root);
  const read = (name, fallback) => (style.getPropertyValue(name) || '').trim() || fallback;
  const bg = read('--bg', '#fff');
  context.fillStyle = '#000';
  context.fillStyle = bg; // the canvas normalises any CSS colour to #rrggbb or rgba()
  const normal = String(context.fillStyle);
  const channels = normal.startsWith('#')
    ? [1, 3, 5].map((at) => parseInt(normal.slice(at, at + 2), 16))
    : (normal.match(/[\d.]+/g) || ['255', '255', '255']).map(Number);
  const dark = (0.299 * channels[0] + 0.587 * channels[1] + 0.114 * channels[2]) < 128;
  return {
    dark,
    fg: read('--fg', dark ? '#ddd' : '#333'),
    bg,
    grid: read('--table-border-color', dark ? '#444' : '#ccc'),
    shade: dark ? 'rgba(255, 255, 255, 0.07)' : 'rgba(0, 0, 0, 0.06)',
    fast: dark ? '#74c0fc' : '#1864ab',
    flaky: dark ? '#ffa94d' : '#d9480f',
    waiting: dark ? '#adb5bd' : '#495057',
    p99: dark ? '#da77f2' : '#862e9c',
    states: dark ? ['#51cf66', '#ff6b6b', '#ffd43b'] : ['#2f9e44', '#e03131', '#f08c00'],
  };
}

// A round step for about `parts` ticks over `range`: 1, 2 or 5 times a power of ten.
function niceStep(range, parts) {
  const rough = Math.max(range / parts, 1e-9);
  const power = 10 ** Math.floor(Math.log10(rough));
  return [1, 2, 5, 10].map((factor) => factor * power).find((candidate) => candidate >= rough);
}

// A line through one value per bucket, drawn at the bucket's middle; NaN
// (no call ended in that bucket) breaks the line.
function line(context, run, value, x, y, colour, dash = []) {
  context.strokeStyle = colour;
  context.lineWidth = 1.5;
  context.setLineDash(dash);
  context.beginPath();
  let drawing = false;
  for (let index = 0; index < run.buckets; index++) {
    const v = value(index);
    if (!Number.isFinite(v)) { drawing = false; continue; }
    const px = x((index + 0.5) * run.bucketMs), py = y(v);
    if (drawing) context.lineTo(px, py); else context.moveTo(px, py);
    drawing = true;
  }
  context.stroke();
  context.setLineDash([]);
}

function draw(canvas, run, stateNames, breakerOn, timeoutMs, colours) {
  const { context, width, height } = prepareCanvas(canvas, 640, 360, colours.bg);
  context.font = '12px sans-serif';
  context.lineWidth = 1;

  const left = 62, right = 14;
  const plotWidth = width - left - right;
  const x = (ms) => left + (plotWidth * ms) / run.durationMs;

  // The legend, in the series' colours, then the breaker's states; an item
  // that would pass the right edge starts a new row.
  const legend = [
    ['fast in flight', colours.fast], ['flaky in flight', colours.flaky],
    ['waiting for a slot', colours.waiting], ['fast p99', colours.p99],
  ];
  const stateKeys = breakerOn ? stateNames.map((name, index) => [`breaker ${name}`, colours.states[index]]) : [];
  let legendX = left, legendY = 3;
  context.textBaseline = 'top';
  context.textAlign = 'left';
  for (const [index, [label, colour]] of [...legend, ...stateKeys].entries()) {
    const itemWidth = 18 + context.measureText(label).width;
    if (legendX > left && legendX + itemWidth > width - right) {
      legendX = left;
      legendY += 16;
    }
    context.fillStyle = colour;
    if (index < legend.length) context.fillRect(legendX, legendY + 5, 14, 3);
    else context.fillRect(legendX + 4, legendY + 1, 10, 10);
    context.fillStyle = colours.fg;
    context.fillText(label, legendX + 18, legendY);
    legendX += itemWidth + 14;
  }

  const band = { top: legendY + 24, height: 14 };
  const flight = { top: band.top + 36, height: 0 };
  flight.height = Math.max(60, (height - flight.top - 40) * 0.55);
  const latency = { top: flight.top + flight.height + 22, height: 0 };
  latency.height = Math.max(40, height - 26 - latency.top);

  // The failure window, shaded across every panel.
  context.fillStyle = colours.shade;
  context.fillRect(x(run.window[0]), band.top - 4, x(run.window[1]) - x(run.window[0]), latency.top + latency.height - band.top + 4);

  // The breaker's state as a band, from its exact transitions.
  context.textBaseline = 'middle';
  context.textAlign = 'right';
  context.fillStyle = colours.fg;
  context.fillText('breaker', left - 6, band.top + band.height / 2);
  if (breakerOn) {
    let from = 0, current = 0;
    for (const [at, next] of [...run.transitions, [run.durationMs, 0]]) {
      context.fillStyle = colours.states[current];
      context.fillRect(x(from), band.top, Math.max(x(Math.min(at, run.durationMs)) - x(from), 1), band.height);
      from = at; current = next;
    }
  } else {
    context.strokeStyle = colours.grid;
    context.strokeRect(left + 0.5, band.top + 0.5, plotWidth - 1, band.height - 1);
    context.textAlign = 'center';
    context.fillStyle = colours.fg;
    context.fillText('no breaker', left + plotWidth / 2, band.top + band.height / 2);
  }

  // Calls in flight at each provider, and waiting in the service.
  let most = 1;
  for (let index = 0; index < run.buckets; index++) {
    most = Math.max(most, run.bucket(index, 'fast_in_flight'), run.bucket(index, 'flaky_in_flight'), run.bucket(index, 'waiting'));
  }
  const flightStep = Math.max(1, niceStep(most, 4));
  const flightTop = flightStep * Math.ceil(most / flightStep);
  const yFlight = (v) => flight.top + flight.height - (flight.height * v) / flightTop;
  context.strokeStyle = colours.grid;
  context.fillStyle = colours.fg;
  context.textAlign = 'right';
  context.textBaseline = 'middle';
  for (let v = 0; v <= flightTop + 1e-9; v += flightStep) {
    context.beginPath();
    context.moveTo(left, yFlight(v));
    context.lineTo(left + plotWidth, yFlight(v));
    context.stroke();
    context.fillText(String(v), left - 6, yFlight(v));
  }
  sideLabel(context, 'calls', flight);
  line(context, run, (i) => run.bucket(i, 'waiting'), x, yFlight, colours.waiting, [4, 3]);
  line(context, run, (i) => run.bucket(i, 'flaky_in_flight'), x, yFlight, colours.flaky);
  line(context, run, (i) => run.bucket(i, 'fast_in_flight'), x, yFlight, colours.fast);

  // The fast provider's p99 on a log axis, so 20 ms and 1 s both read.
  let slowest = Math.max(timeoutMs, 100);
  for (let index = 0; index < run.buckets; index++) {
    const v = run.bucket(index, 'fast_p99_ms');
    if (Number.isFinite(v)) slowest = Math.max(slowest, v);
  }
  const decades = Math.ceil(Math.log10(slowest));
  const yLatency = (ms) => latency.top + latency.height - (latency.height * Math.log10(Math.max(ms, 1))) / decades;
  context.strokeStyle = colours.grid;
  context.fillStyle = colours.fg;
  for (let decade = 0; decade <= decades; decade++) {
    const y = yLatency(10 ** decade);
    context.beginPath();
    context.moveTo(left, y);
    context.lineTo(left + plotWidth, y);
    context.stroke();
    context.fillText(formatMs(10 ** decade), left - 6, y);
  }
  sideLabel(context, 'fast p99', latency);
  // The timeout, for reference.
  context.strokeStyle = colours.fg;
  context.setLineDash([2, 4]);
  context.beginPath();
  context.moveTo(left, yLatency(timeoutMs));
  context.lineTo(left + plotWidth, yLatency(timeoutMs));
  context.stroke();
  context.setLineDash([]);
  context.textAlign = 'right';
  context.textBaseline = 'bottom';
  context.fillText('timeout', left + plotWidth, yLatency(timeoutMs) - 2);
  line(context, run, (i) => run.bucket(i, 'fast_p99_ms'), x, yLatency, colours.p99);

  // Time in seconds along the bottom.
  context.textBaseline = 'top';
  context.textAlign = 'center';
  context.fillStyle = colours.fg;
  const step = niceStep(run.durationMs, 6);
  for (let at = 0; at <= run.durationMs + 1e-9; at += step) {
    const label = formatMs(at);
    const half = context.measureText(label).width / 2;
    context.textAlign = x(at) + half > width - 2 ? 'right' : 'center';
    context.fillText(label, Math.min(x(at), width - 2), latency.top + latency.height + 6);
  }
  context.textAlign = 'left';
  context.fillText('failure window', x(run.window[0]) + 4, flight.top - 12);
}

async function main() {
  const root = document.getElementById('widget-overload');
  if (!root) return;
  await init();
  const read = reader(header_fields().split(','), total_fields().split(','), bucket_fields().split(','));
  const stateNames = breaker_states().split(',');

  const mode = select('mode', 'Flaky provider in its failure window', failure_modes().split(','), 'hangs');
  const rate = slider('rate', 'Share failing in the window', 0, 100, 5, 50, ' %');
  const workers = slider('workers', 'Workers per provider', 1, 64, 1, 16, '');
  const service = slider('service', 'Service time', 5, 200, 5, 20, ' ms');
  const limitMode = select('limit-mode', 'Limit', limit_modes().split(','), 'shared');
  const limit = slider('limit', 'Slots', 1, 100, 1, 20, '');
  const timeout = slider('timeout', 'Timeout', 100, 6000, 100, 1000, ' ms');
  const breaker = element('input', { type: 'checkbox', name: 'breaker', 'aria-label': 'Circuit breaker' });
  const window_ = slider('breaker-window', 'Window', 4, 100, 1, 20, ' calls');
  const threshold = slider('breaker-rate', 'Opens at', 10, 100, 5, 50, ' % failed');
  const open = slider('breaker-open', 'Open for', 500, 20000, 500, 5000, ' ms');
  const probes = slider('breaker-probes', 'Probes', 1, 20, 1, 5, '');
  const arrivals = slider('arrivals', 'Requests', 20, 400, 10, 200, ' /s');
  const seed = element('input', { type: 'number', name: 'seed', min: 1, max: 1000000, value: 1, 'aria-label': 'Seed' });
  const canvas = element('canvas', { class: 'overload-chart', role: 'img', 'aria-label': 'Breaker state, calls in flight and the fast provider\'s p99 over a minute' });
  Object.assign(canvas.style, { width: '100%', height: '360px', display: 'block' });
  const totals = element('p', { class: 'overload-totals', 'aria-live': 'polite' });

  const group = (title, rows) => {
    const box = element('div', { class: 'overload-group' }, [element('strong', {}, [title]), ...rows]);
    Object.assign(box.style, { display: 'flex', flexWrap: 'wrap', gap: '0.3em 1.2em', alignItems: 'center' });
    return box;
  };
  const controls = element('div', { class: 'overload-controls' }, [
    group('Providers', [mode.row, rate.row, workers.row, service.row]),
    group('Service', [limitMode.row, limit.row, timeout.row, arrivals.row,
      element('label', { class: 'overload-control' }, ['Seed ', seed])]),
    group('Breaker', [element('label', { class: 'overload-control' }, ['on ', breaker]),
      window_.row, threshold.row, open.row, probes.row]),
  ]);
  // Inline layout, so the widget needs no stylesheet of its own.
  Object.assign(controls.style, { display: 'flex', flexDirection: 'column', gap: '0.4em', margin: '0.5em 0' });
  seed.style.width = '6em';
  // Form controls take the theme's colours, so they are readable in the dark themes.
  for (const field of [mode.input, limitMode.input, seed]) {
    Object.assign(field.style, {
      background: 'var(--bg)', color: 'var(--fg)',
      border: '1px solid var(--searchbar-border-color, #888)', borderRadius: '3px', padding: '0.1em 0.3em',
    });
  }
  root.replaceChildren(controls, canvas, totals);

  const rerun = (event) => {
    const timeoutMs = Number(timeout.input.value);
    const breakerOn = breaker.checked;
    for (const each of [window_, threshold, open, probes]) each.input.disabled = !breakerOn;
    limit.input.disabled = Number(limitMode.input.value) === 0;
    const flat = simulate(
      Math.max(1, Number(seed.value) | 0),
      Number(arrivals.input.value),
      Number(mode.input.value),
      Number(rate.input.value) / 100,
      Number(workers.input.value),
      Number(service.input.value),
      Number(limitMode.input.value),
      Number(limit.input.value),
      timeoutMs,
      breakerOn,
      Number(window_.input.value),
      Number(threshold.input.value) / 100,
      Number(open.input.value),
      Number(probes.input.value),
    );
    const run = read(flat);
    draw(canvas, run, stateNames, breakerOn, timeoutMs, themeColours(root, canvas.getContext('2d')));
    let reachedInWindow = 0;
    for (let index = 0; index < run.buckets; index++) {
      const start = index * run.bucketMs;
      if (start >= run.window[0] && start < run.window[1]) reachedInWindow += run.bucket(index, 'flaky_sent');
    }
    const fast = (name) => run.total('fast', name), flaky = (name) => run.total('flaky', name);
    const ms = (v) => (Number.isFinite(v) ? `${Math.round(v)} ms` : 'none');
    totals.textContent =
      `Fast provider: ${fast('ok')} ok, ${fast('timed_out')} timed out, p50 ${ms(fast('p50_ms'))}, ` +
      `p99 ${ms(fast('p99_ms'))}, at most ${fast('peak_in_flight')} in flight. ` +
      `Flaky provider: ${flaky('ok')} ok, ${flaky('failed')} failed, ${flaky('timed_out')} timed out, ` +
      `${flaky('refused')} refused by the breaker; ${reachedInWindow} calls reached it in the failure window, ` +
      `at most ${flaky('peak_in_flight')} in flight.`;
    state.last = {
      fastP99Ms: fast('p99_ms'), reachedInWindow, flakyRefused: flaky('refused'),
      fastPeakInFlight: fast('peak_in_flight'), transitions: run.transitions.length,
    };
    // Input event to chart and totals redrawn (the canvas calls are done;
    // the browser paints them at its next frame).
    if (event && Number.isFinite(event.timeStamp)) {
      state.lastRedrawMs = performance.now() - event.timeStamp;
      state.redrawTimesMs.push(state.lastRedrawMs);
    }
    state.redraws += 1;
  };

  const sliders = [rate, workers, service, limit, timeout, window_, threshold, open, probes, arrivals];
  for (const control of sliders) control.input.addEventListener('input', rerun);
  seed.addEventListener('input', rerun);
  for (const control of [mode.input, limitMode.input, breaker]) control.addEventListener('change', rerun);
  // The theme can change under us (mdBook's theme menu): redraw with its colours.
  drawAndFollowTheme(state, rerun);
}

start(state, 'overload', main);
