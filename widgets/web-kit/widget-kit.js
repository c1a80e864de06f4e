// What every widget's page script and browser check share: building controls
// and waiting for a widget. The xtask copies this file beside each widget's
// own files (target/book/widgets/<name>/widget-kit.js), so a widget imports
// it as './widget-kit.js' and a check.js loads it with `import()`.

/**
 * Where each named field sits in a flat array whose field names the wasm
 * exports: `{ name: index, ... }`, and `length`, where the next part begins.
 */
export function fieldIndex(names) {
  if (names.includes('length')) throw new Error('a field may not be called length');
  return { ...Object.fromEntries(names.map((name, index) => [name, index])), length: names.length };
}

/** An element with attributes and children. */
export function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** A labelled range input that shows its value; `rowClass` styles the row. */
export function slider(rowClass, name, label, min, max, step, value, unit) {
  const input = element('input', { type: 'range', name, min, max, step, value, 'aria-label': label });
  const shown = element('output', { for: name });
  const update = () => { shown.textContent = `${input.value}${unit}`; };
  update();
  input.addEventListener('input', update);
  return { input, row: element('label', { class: rowClass }, [`${label} `, input, ' ', shown]) };
}

/** A labelled select of `names` (values are their indices), `chosen` selected. */
export function select(rowClass, name, label, names, chosen) {
  const input = element('select', { name, 'aria-label': label },
    names.map((each, index) => {
      const option = element('option', { value: String(index) }, [each]);
      if (each === chosen) option.selected = true;
      return option;
    }));
  return { input, row: element('label', { class: rowClass }, [`${label} `, input]) };
}

/** Milliseconds as a reader wants them: "750 ms", "12 s", "1.5 s". */
export function formatMs(ms) {
  if (ms === 0) return '0';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  return `${Number.isInteger(seconds) ? seconds : seconds.toFixed(1)} s`;
}

/**
 * Sizes a canvas for the screen's pixel ratio (its CSS size, or `width` x
 * `height` before layout), clears it to `background`, and returns the 2D
 * context with the width and height in CSS pixels.
 */
export function prepareCanvas(canvas, width, height, background) {
  const context = canvas.getContext('2d');
  const ratio = window.devicePixelRatio || 1;
  const cssWidth = canvas.clientWidth || width;
  const cssHeight = canvas.clientHeight || height;
  if (canvas.width !== Math.round(cssWidth * ratio)) canvas.width = Math.round(cssWidth * ratio);
  if (canvas.height !== Math.round(cssHeight * ratio)) canvas.height = Math.round(cssHeight * ratio);
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.fillStyle = background;
  context.fillRect(0, 0, cssWidth, cssHeight);
  return { context, width: cssWidth, height: cssHeight };
}

// For the browser checks.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The nearest-rank percentile (0 to 100) of `values`. */
export function percentile(values, percent) {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((percent / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

/**
 * Starts a widget's `main`: a failure is kept in `state.error` (the browser
 * check reports it) and logged.
 */
export function start(state, name, main) {
  main().catch((error) => {
    state.error = String(error);
    console.error(`${name} widget:`, error);
  });
}

/** Runs `redraw` now and whenever mdBook's theme changes, then marks `state` ready. */
export function drawAndFollowTheme(state, redraw) {
  new MutationObserver(() => redraw()).observe(document.documentElement, { attributes: true, attributeFilter: ['class'] });
  redraw();
  state.ready = true;
}

/**
 * Waits (at most 10 s) until the widget `name` (its state is
 * `window.__<name>Widget`) is ready; returns its state, its container and how
 * long the wait took.
 */
export async function ready(name) {
  const stateName = `__${name}Widget`;
  const started = performance.now();
  while (!(window[stateName] && window[stateName].ready)) {
    if (window[stateName] && window[stateName].error) {
      throw new Error(`the widget failed to start: ${window[stateName].error}`);
    }
    if (performance.now() - started > 10000) throw new Error('the widget was not ready after 10 s');
    await sleep(50);
  }
  const root = document.getElementById(`widget-${name}`);
  return { state: window[stateName], root, loadMs: performance.now() - started };
}

/** Resolves at the next animation frame, so the browser can paint in between. */
export const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

/**
 * Runs a widget's browser check: waits for the widget `name` (bounded, see
 * `ready`), finds its canvas and its `.<name>-totals` line, calls
 * `body({ state, root, canvas, totals, errors, metrics })`, and always ends
 * with `done({ errors, metrics })`, a thrown error added to `errors`.
 */
export async function check(name, done, body) {
  const errors = [];
  const metrics = {};
  try {
    const { state, root, loadMs } = await ready(name);
    metrics.load_ms = loadMs;
    const canvas = root.querySelector('canvas');
    const totals = root.querySelector(`.${name}-totals`);
    if (!canvas || !totals) throw new Error('the widget has no canvas or no totals line');
    await body({ state, root, canvas, totals, errors, metrics });
  } catch (error) {
    errors.push(String((error && error.stack) || error));
  }
  done({ errors, metrics });
}

/**
 * Input-to-redraw: calls `input(step)` for `steps` steps, one per frame, and
 * records the widget's own redraw times as `redraw_*` metrics; an error if
 * the widget did not redraw once per input. The times are a measurement for
 * the report, never a pass mark: a median under one frame held on a quiet
 * machine and failed one browser run in twenty on a loaded one.
 */
export async function measureRedraws(state, steps, input, { errors, metrics }) {
  state.redrawTimesMs.length = 0;
  const redrawsBefore = state.redraws;
  for (let step = 0; step < steps; step++) {
    input(step);
    await nextFrame();
  }
  const redraws = state.redraws - redrawsBefore;
  if (redraws !== steps) errors.push(`expected ${steps} redraws, saw ${redraws}`);
  const times = state.redrawTimesMs.slice();
  if (times.length === 0) {
    errors.push('no input-to-redraw time was recorded');
    return;
  }
  metrics.redraw_median_ms = percentile(times, 50);
  metrics.redraw_p95_ms = percentile(times, 95);
  metrics.redraw_max_ms = Math.max(...times);
  metrics.redraw_samples = times.length;
}

/** Sets an input's value and dispatches `eventName`, as a reader's change would. */
export function setValue(input, value, eventName) {
  input.value = String(value);
  input.dispatchEvent(new Event(eventName, { bubbles: true }));
}
