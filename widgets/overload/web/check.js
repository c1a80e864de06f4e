// The overload widget's browser test: the body of an async WebDriver script
// run in the chapter page. It drives the widget as a reader would (real DOM
// events), checks that the totals and the timeline change, that the bulkhead
// and the breaker show their effect, and measures input-to-redraw.
const done = arguments[arguments.length - 1];

// The helpers every widget shares, staged beside this widget's files.
import(new URL('widgets/overload/widget-kit.js', document.baseURI).href).then((kit) => kit.check('overload', done, async ({ state, root, canvas, totals, errors, metrics }) => {
  const { nextFrame, setValue } = kit;
  const control = (selector) => root.querySelector(selector);
  const mode = control('select[name=mode]');
  const limitMode = control('select[name=limit-mode]');
  const breaker = control('input[name=breaker]');
  const names = ['rate', 'limit', 'timeout', 'arrivals', 'workers', 'service'];
  const sliders = Object.fromEntries(names.map((name) => [name, control(`input[name=${name}]`)]));
  if (!mode || !limitMode || !breaker || Object.values(sliders).some((input) => !input)) {
    throw new Error('a widget control is missing');
  }

  const setChoice = (input, name) => {
    const index = [...input.options].findIndex((option) => option.textContent === name);
    if (index < 0) throw new Error(`no option ${name} in ${input.name}`);
    setValue(input, index, 'change');
  };
  const setBreaker = (on) => {
    breaker.checked = on;
    breaker.dispatchEvent(new Event('change', { bubbles: true }));
  };
  const snapshot = () => ({ image: canvas.toDataURL(), text: totals.textContent, ...state.last });
  const changed = (what, before, after) => {
    if (before.text === after.text) errors.push(`the totals did not change with ${what}: ${after.text}`);
    if (before.image === after.image) errors.push(`the timeline did not change with ${what}`);
  };

  // 1. The flaky provider hangs on half its calls in the window; one limit
  //    of 20 slots is shared by both providers; no breaker.
  setChoice(mode, 'hangs');
  setValue(sliders.rate, 50, 'input');
  setValue(sliders.workers, 16, 'input');
  setValue(sliders.service, 20, 'input');
  setValue(sliders.timeout, 1000, 'input');
  setValue(sliders.arrivals, 200, 'input');
  setValue(sliders.limit, 20, 'input');
  setBreaker(false);
  setChoice(limitMode, 'shared');
  const shared = snapshot();
  metrics.fast_p99_shared_ms = shared.fastP99Ms;

  // 2. A bulkhead: the same 20 slots, but for each provider. The fast
  //    provider's p99 falls from near the timeout to its own service time.
  setChoice(limitMode, 'per-provider');
  const isolated = snapshot();
  changed('the limit mode', shared, isolated);
  metrics.fast_p99_per_provider_ms = isolated.fastP99Ms;
  const p99In = (text) => Number((text.match(/Fast provider: .*?p99 (\d+) ms/) || [])[1]);
  if (!(p99In(isolated.text) * 5 <= p99In(shared.text))) {
    errors.push(`per-provider limits did not keep the fast p99 far below the shared limit's: ${shared.text} / ${isolated.text}`);
  }
  if (!(isolated.fastPeakInFlight <= 20)) errors.push(`the fast provider held ${isolated.fastPeakInFlight} calls with 20 slots`);

  // 3. The breaker: the calls that reach the flaky provider in the window drop.
  setBreaker(true);
  const broken = snapshot();
  changed('the breaker', isolated, broken);
  const reachedIn = (text) => Number((text.match(/(\d+) calls reached it in the failure window/) || [])[1]);
  metrics.flaky_reached_in_window_without_breaker = reachedIn(isolated.text);
  metrics.flaky_reached_in_window_with_breaker = reachedIn(broken.text);
  metrics.flaky_refused_by_breaker = broken.flakyRefused;
  metrics.breaker_transitions = broken.transitions;
  if (!(reachedIn(broken.text) * 3 <= reachedIn(isolated.text))) {
    errors.push(`the breaker did not cut the calls reaching the flaky provider: ${isolated.text} / ${broken.text}`);
  }
  if (!(broken.transitions >= 2)) errors.push(`the breaker never opened and closed: ${broken.transitions} transitions`);

  // 4. A slider and the failure mode change the totals and the timeline too.
  setValue(sliders.arrivals, 300, 'input');
  const busier = snapshot();
  changed('the requests slider', broken, busier);
  setChoice(mode, 'fails');
  const failing = snapshot();
  changed('the failure mode', busier, failing);

  // 5. The theme: a dark theme redraws the timeline in its colours.
  const html = document.documentElement;
  const themes = ['light', 'rust', 'coal', 'navy', 'ayu'];
  const theme = themes.find((name) => html.classList.contains(name)) || 'light';
  const other = ['coal', 'navy', 'ayu'].includes(theme) ? 'light' : 'coal';
  html.classList.replace(theme, other) || html.classList.add(other);
  await nextFrame();
  const themed = snapshot();
  if (themed.image === failing.image) errors.push(`the timeline did not follow the theme from ${theme} to ${other}`);
  html.classList.remove(other);
  html.classList.add(theme);
  await nextFrame();

  // 6. Input-to-redraw at 200 requests/s with a bulkhead and the breaker,
  //    over 20 inputs on the requests slider, one per frame so the browser
  //    can paint in between.
  setChoice(mode, 'hangs');
  setValue(sliders.arrivals, 200, 'input');
  await kit.measureRedraws(state, 20, (step) => setValue(sliders.arrivals, 150 + 10 * (step % 10), 'input'), { errors, metrics });
}), (error) => done({ errors: [`the widget kit did not load: ${error}`], metrics: {} }));
