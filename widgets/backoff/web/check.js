// The backoff widget's browser test: the body of an async WebDriver script run
// in the chapter page. It drives the widget as a reader would (real DOM events),
// checks that the totals and the chart change, and measures input-to-redraw.
const done = arguments[arguments.length - 1];
const errors = [];
const metrics = {};

(async () => {
  // The helpers every widget shares, staged beside this widget's files.
  const kit = await import(new URL('widgets/backoff/widget-kit.js', document.baseURI).href);
  const { percentile, setValue } = kit;
  // The widget loads as a module after the page: wait for it (bounded).
  const { state, root, loadMs } = await kit.ready('backoff');
  metrics.load_ms = loadMs;
  const canvas = root.querySelector('canvas');
  const totals = root.querySelector('.backoff-totals');
  const strategy = root.querySelector('select[name=strategy]');
  const clients = root.querySelector('input[name=clients]');
  const base = root.querySelector('input[name=base]');
  if (!canvas || !totals || !strategy || !clients || !base) throw new Error('a widget control is missing');

  const snapshot = () => ({ image: canvas.toDataURL(), text: totals.textContent });

  // 1. The strategy: exponential -> full jitter changes the totals and the chart.
  setValue(clients, 100, 'input');
  const names = [...strategy.options].map((option) => option.textContent);
  setValue(strategy, names.indexOf('exponential'), 'change');
  const before = snapshot();
  setValue(strategy, names.indexOf('full-jitter'), 'change');
  const after = snapshot();
  if (before.text === after.text) errors.push(`totals did not change with the strategy: ${after.text}`);
  if (before.image === after.image) errors.push('the chart did not change with the strategy');
  const callsOf = (text) => Number((text.match(/: (\d+) calls/) || [])[1]);
  metrics.calls_exponential_100 = callsOf(before.text);
  metrics.calls_full_jitter_100 = callsOf(after.text);
  if (!(metrics.calls_full_jitter_100 < metrics.calls_exponential_100)) {
    errors.push(`full jitter did not need fewer calls: ${before.text} / ${after.text}`);
  }

  // 2. A slider: more clients changes the totals and the chart.
  setValue(clients, 200, 'input');
  const moreClients = snapshot();
  if (moreClients.text === after.text) errors.push('totals did not change with the clients slider');
  if (moreClients.image === after.image) errors.push('the chart did not change with the clients slider');

  // 3. Input-to-redraw at 100 clients, over 20 inputs on the base slider,
  //    one per frame so the browser can paint in between.
  setValue(clients, 100, 'input');
  state.redrawTimesMs.length = 0;
  const redrawsBefore = state.redraws;
  for (let step = 0; step < 20; step++) {
    setValue(base, 2 + (step % 10), 'input');
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));
  }
  if (state.redraws - redrawsBefore !== 20) errors.push(`expected 20 redraws, saw ${state.redraws - redrawsBefore}`);
  const times = state.redrawTimesMs.slice();
  if (times.length === 0) {
    errors.push('no input-to-redraw time was recorded');
  } else {
    metrics.redraw_median_ms = percentile(times, 50);
    metrics.redraw_p95_ms = percentile(times, 95);
    metrics.redraw_max_ms = Math.max(...times);
    metrics.redraw_samples = times.length;
  }
})().then(
  () => done({ errors, metrics }),
  (error) => done({ errors: errors.concat([String(error && error.stack || error)]), metrics }),
);
