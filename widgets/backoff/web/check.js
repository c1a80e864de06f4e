// The backoff widget's browser test: the body of an async WebDriver script run
// in the chapter page. It drives the widget as a reader would (real DOM events),
// checks that the totals and the chart change, and measures input-to-redraw.
const done = arguments[arguments.length - 1];

// The helpers every widget shares, staged beside this widget's files.
import(new URL('widgets/backoff/widget-kit.js', document.baseURI).href).then((kit) => kit.check('backoff', done, async ({ state, root, canvas, totals, errors, metrics }) => {
  const { setValue } = kit;
  const strategy = root.querySelector('select[name=strategy]');
  const clients = root.querySelector('input[name=clients]');
  const base = root.querySelector('input[name=base]');
  if (!strategy || !clients || !base) throw new Error('a widget control is missing');

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
  await kit.measureRedraws(state, 20, (step) => setValue(base, 2 + (step % 10), 'input'), { errors, metrics });
}), (error) => done({ errors: [`the widget kit did not load: ${error}`], metrics: {} }));
