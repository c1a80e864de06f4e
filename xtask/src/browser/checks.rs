//! What the browser checks of `cargo xtask test` assert about the built book:
//! chapter pages load their charts, the chart that shows follows the theme,
//! search finds text, and no page logs a console error.

use std::{
    path::{Path, PathBuf},
    thread,
};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use super::Browser;
use crate::{project::Project, serve, tidy, widgets};

/// Runs every check against the book in `book_out`, served on 127.0.0.1:0.
pub fn check_book(book_out: &Path) -> Result<()> {
    let listener = serve::bind(0)?;
    let site = Site {
        base: format!("http://{}", listener.local_addr()?),
        root: book_out.to_path_buf(),
    };
    let root = book_out.to_path_buf();
    // The server thread ends with the process; it only reads files.
    thread::spawn(move || serve::serve_forever(listener, root));
    let browser = Browser::start()?;
    // The theme is set in the origin's localStorage, so the browser starts
    // on a page of the book rather than on about:blank.
    site.open(&browser, "index.html")?;

    let mut pages_with_charts = 0;
    for page in tidy::files_with_extension(book_out, "html")? {
        let text = std::fs::read_to_string(&page)?;
        let relative = page
            .strip_prefix(book_out)
            .unwrap_or(&page)
            .to_string_lossy()
            .to_string();
        if !text.contains("class=\"lab-chart\"") || relative == "print.html" {
            continue;
        }
        pages_with_charts += 1;
        let expected = text.matches("class=\"lab-chart\"").count();
        check_charts(&browser, &site, &relative, expected)?;
    }
    ensure!(
        pages_with_charts > 0,
        "no page of the built book shows a chart"
    );
    check_widgets(&browser, &site)?;
    let quizzes = check_quizzes(&browser, &site)?;
    check_search(&browser, &site)?;
    check_presenter(&browser, &site)?;
    let errors = browser.console_errors()?;
    ensure!(
        errors.is_empty(),
        "the browser console logged errors:\n  {}",
        errors.join("\n  ")
    );
    eprintln!(
        "browser: {pages_with_charts} chapter page(s) with charts, theme switch, search and the \
         presenter modes checked; {quizzes} quiz question(s) answered wrong and right"
    );
    Ok(())
}

/// The built book as the browser sees it: served from `base`, read from `root`.
struct Site {
    base: String,
    root: PathBuf,
}

impl Site {
    /// Opens a page of the book and waits until all of it has loaded
    /// (`Browser::open`): the page's size on disk is what must arrive.
    fn open(&self, browser: &Browser, page: &str) -> Result<()> {
        let bytes = std::fs::metadata(self.root.join(page))
            .with_context(|| format!("{page} is not in the built book"))?
            .len();
        browser.open(&format!("{}/{page}", self.base), bytes)
    }
}

/// The theme the page shows and, for each chart figure, its images. It runs
/// after `Browser::open`, so the load event has run: every image has loaded
/// or failed by then, and `complete` with a width means it loaded.
const CHART_STATE: &str = r#"
    const figures = [...document.querySelectorAll('figure.lab-chart')];
    return {
      theme: document.documentElement.className,
      figures: figures.map(figure => [...figure.querySelectorAll('img')].map(image => ({
        theme: image.className,
        loaded: image.complete && image.naturalWidth > 0,
        shown: getComputedStyle(image).display !== 'none' && image.getBoundingClientRect().width > 0,
      }))),
    };
"#;

fn check_charts(browser: &Browser, site: &Site, page: &str, expected: usize) -> Result<()> {
    for theme in ["light", "coal"] {
        // mdBook reads the theme from localStorage before the page is drawn:
        // set it on the page being left, then open the chapter.
        browser.eval(&format!(
            "localStorage.setItem('mdbook-theme', '{theme}'); return true;"
        ))?;
        site.open(browser, page)?;
        let state = browser.eval(CHART_STATE)?;
        let shown_theme = state["theme"].as_str().unwrap_or_default();
        ensure!(
            shown_theme.split_whitespace().any(|class| class == theme),
            "{page}: the {theme} theme was set but the page shows classes {shown_theme:?}"
        );
        let figures = state["figures"]
            .as_array()
            .context("the chart script returned no list")?;
        ensure!(
            figures.len() == expected,
            "{page}: {} chart figures in the browser, {expected} in the HTML",
            figures.len()
        );
        let wanted = if theme == "light" {
            "chart-light"
        } else {
            "chart-dark"
        };
        for (index, figure) in figures.iter().enumerate() {
            let images = figure.as_array().context("a figure without images")?;
            ensure!(
                images.len() == 2,
                "{page}: chart {} has {} images, not a light and a dark one",
                index + 1,
                images.len()
            );
            for image in images {
                let name = image["theme"].as_str().unwrap_or_default();
                if image["loaded"] != Value::Bool(true) {
                    bail!("{page}: chart {} ({name}) did not load", index + 1);
                }
                let shown = image["shown"] == Value::Bool(true);
                if shown != (name == wanted) {
                    bail!(
                        "{page}: in the {theme} theme chart {} shows {name}: {shown}",
                        index + 1
                    );
                }
            }
        }
    }
    browser.eval("localStorage.removeItem('mdbook-theme'); return true;")?;
    Ok(())
}

/// Answers every question of the page's quiz as a reader would (clicking the
/// inputs and the Check button): first wrongly, then rightly, and each time
/// asserts the verdict and that every option's explanation is shown. Returns
/// the number of questions and the progress line; `errors` lists what failed.
const QUIZ_ANSWER: &str = r#"
    const errors = [];
    const section = document.querySelector('section.quiz');
    if (!section) return { errors: ['no quiz in the page'], questions: 0 };
    section.querySelector('.quiz-reset').click();
    if (section.classList.contains('quiz-nojs')) errors.push('quiz.js did not start the quiz');
    const questions = [...section.querySelectorAll('.quiz-question')];
    const shown = (element) => getComputedStyle(element).display !== 'none' && element.getClientRects().length > 0;
    const answer = (question, pick) => {
      const options = [...question.querySelectorAll('.quiz-option')];
      options.forEach((option, index) => {
        const input = option.querySelector('input');
        if (input.checked !== pick(option, index)) input.click();
      });
      question.querySelector('.quiz-check').click();
    };
    questions.forEach((question, number) => {
      const label = `question ${number + 1}`;
      const options = [...question.querySelectorAll('.quiz-option')];
      const right = (option) => option.dataset.correct === 'true';
      const whys = options.map((option) => option.querySelector('.quiz-why'));
      if (whys.some(shown)) errors.push(`${label}: an explanation shows before any answer`);
      const wrongIndex = options.findIndex((option) => !right(option));
      if (wrongIndex < 0) { errors.push(`${label}: no wrong option to try`); return; }
      // Wrong: the right options plus one wrong one (for one choice: the wrong one alone).
      answer(question, (option, index) => index === wrongIndex || (question.dataset.multiple === 'true' && right(option)));
      if (!question.classList.contains('quiz-wrong')) errors.push(`${label}: a wrong answer was not judged wrong`);
      whys.forEach((why, index) => {
        if (!shown(why) || why.textContent.trim() === '') errors.push(`${label}: option ${index + 1}'s explanation is not shown after answering`);
      });
      answer(question, (option) => right(option));
      if (!question.classList.contains('quiz-right')) errors.push(`${label}: the right answer was not judged right`);
      if (!/^Right/.test(question.querySelector('.quiz-verdict').textContent)) errors.push(`${label}: no "Right" verdict`);
    });
    return { errors, questions: questions.length, progress: section.querySelector('.quiz-progress').textContent };
"#;

/// After a reload: whether the answers came back from localStorage, and that
/// "Start again" clears them.
const QUIZ_AFTER_RELOAD: &str = r#"
    const section = document.querySelector('section.quiz');
    const right = section.querySelectorAll('.quiz-question.quiz-right').length;
    const restored = section.querySelector('.quiz-progress').textContent;
    section.querySelector('.quiz-reset').click();
    const cleared = section.querySelectorAll('.quiz-answered').length === 0
      && Object.keys(localStorage).every((key) => !key.startsWith('labbook-quiz:'));
    return { right, restored, cleared, progress: section.querySelector('.quiz-progress').textContent };
"#;

/// Drives the quiz of every page that has one; returns how many questions
/// were answered.
fn check_quizzes(browser: &Browser, site: &Site) -> Result<usize> {
    let mut answered = 0;
    for page in tidy::files_with_extension(&site.root, "html")? {
        let relative = page
            .strip_prefix(&site.root)
            .unwrap_or(&page)
            .to_string_lossy()
            .to_string();
        if relative == "print.html"
            || !std::fs::read_to_string(&page)?.contains("<section class=\"quiz")
        {
            continue;
        }
        site.open(browser, &relative)?;
        let result = browser.eval(QUIZ_ANSWER)?;
        let errors: Vec<&str> = result["errors"]
            .as_array()
            .map(|list| list.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        ensure!(
            errors.is_empty(),
            "the quiz in {relative}:\n  {}",
            errors.join("\n  ")
        );
        let questions = result["questions"].as_u64().unwrap_or(0) as usize;
        let all_right = format!("{questions} of {questions} answered right");
        ensure!(
            result["progress"].as_str() == Some(all_right.as_str()),
            "the quiz in {relative}: progress says {}, not {all_right:?}",
            result["progress"]
        );
        site.open(browser, &relative)?;
        let reloaded = browser.eval(QUIZ_AFTER_RELOAD)?;
        ensure!(
            reloaded["right"].as_u64() == Some(questions as u64),
            "the quiz in {relative}: after a reload {} of {questions} answers came back from localStorage",
            reloaded["right"]
        );
        ensure!(
            reloaded["cleared"] == Value::Bool(true)
                && reloaded["progress"].as_str()
                    == Some(&format!("0 of {questions} answered right")),
            "the quiz in {relative}: Start again did not clear the answers: {reloaded}"
        );
        answered += questions;
    }
    Ok(answered)
}

const SEARCH: &str = r#"
    const done = arguments[arguments.length - 1];
    document.getElementById('mdbook-search-toggle').click();
    const bar = document.getElementById('mdbook-searchbar');
    bar.value = 'TIME_WAIT';
    bar.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'T'}));
    bar.dispatchEvent(new Event('input', {bubbles: true}));
    const started = Date.now();
    (function poll() {
      const hits = document.querySelectorAll('#mdbook-searchresults li').length;
      if (hits > 0 || Date.now() - started > 10000) { done(hits); } else { setTimeout(poll, 100); }
    })();
"#;

/// The state of a chapter's speaker notes and projector mode; `press(key)`
/// sends a key to the page as a reader would.
const PRESENTER: &str = r#"
    const notes = [...document.querySelectorAll('.speaker-notes')];
    const press = (key) => document.body.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true}));
    const state = () => ({
      notes: notes.length,
      shown: notes.filter((note) => getComputedStyle(note).display !== 'none').length,
      slides: document.querySelectorAll('main > section.slide').length,
      buttons: document.querySelectorAll('.presenter-button').length,
    });
"#;

/// The presenter toggle shows and hides the notes (and remembers them from
/// page to page), print leaves them out unless they are on, and projector
/// mode cuts the page into one section per screen and back.
fn check_presenter(browser: &Browser, site: &Site) -> Result<()> {
    let page = "keepalive-race.html";
    site.open(browser, page)?;
    let run = |script: &str| browser.eval(&format!("{PRESENTER}{script}"));
    let start = run("return state();")?;
    ensure!(
        start["notes"].as_u64() > Some(0) && start["shown"] == 0 && start["buttons"] == 2,
        "{page}: speaker notes must be there and hidden, with two presenter buttons: {start}"
    );
    let shown = run("press('n'); return state();")?;
    ensure!(
        shown["shown"] == start["notes"],
        "{page}: the key n did not show the speaker notes: {shown}"
    );
    site.open(browser, page)?;
    let print_on = |media: &str| browser.cdp("Emulation.setEmulatedMedia", json!({"media": media}));
    print_on("print")?;
    let printed_with = run("return state();")?;
    run("press('n');")?;
    let printed_without = run("return state();")?;
    print_on("")?;
    ensure!(
        printed_with["shown"] == start["notes"] && printed_without["shown"] == 0,
        "{page}: after a reload the notes must stay on and print with them, and print none once \
         hidden: {printed_with} then {printed_without}"
    );
    let slides = run("press('p'); const on = state(); press('p'); return [on, state()];")?;
    ensure!(
        slides[0]["slides"].as_u64() > Some(3) && slides[1]["slides"] == 0,
        "{page}: projector mode must cut the page into sections and put it back: {slides}"
    );
    Ok(())
}

fn check_search(browser: &Browser, site: &Site) -> Result<()> {
    site.open(browser, "index.html")?;
    let hits = browser.eval_async(SEARCH)?.as_u64().unwrap_or(0);
    ensure!(hits > 0, "searching the book for TIME_WAIT found nothing");
    Ok(())
}

/// Runs each widget's `web/check.js` in the chapter page that shows it.
fn check_widgets(browser: &Browser, site: &Site) -> Result<()> {
    let book_out = site.root.as_path();
    let project = Project::locate();
    for widget in widgets::discover(&project)? {
        let marker = format!("data-widget=\"{}\"", widget.name);
        let mut pages = Vec::new();
        for page in tidy::files_with_extension(book_out, "html")? {
            let relative = page
                .strip_prefix(book_out)
                .unwrap_or(&page)
                .to_string_lossy()
                .to_string();
            if relative != "print.html" && std::fs::read_to_string(&page)?.contains(&marker) {
                pages.push(relative);
            }
        }
        let Some(page) = pages.first() else {
            bail!(
                "widget {} is in widgets/ but no chapter shows it",
                widget.name
            );
        };
        let Some(script_path) = widget.check_script() else {
            bail!("widget {} has no web/check.js browser test", widget.name);
        };
        let script = std::fs::read_to_string(&script_path)?;
        site.open(browser, page)?;
        let result = browser
            .eval_async(&script)
            .with_context(|| format!("running {}", script_path.display()))?;
        let errors: Vec<String> = result["errors"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|error| error.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_else(|| {
                vec![format!(
                    "check.js returned {result} instead of {{errors, metrics}}"
                )]
            });
        ensure!(
            errors.is_empty(),
            "widget {} in {page}:\n  {}",
            widget.name,
            errors.join("\n  ")
        );
        let console = browser.console_errors()?;
        ensure!(
            console.is_empty(),
            "widget {} in {page}: console errors:\n  {}",
            widget.name,
            console.join("\n  ")
        );
        eprintln!(
            "browser: widget {} in {page}: {}",
            widget.name, result["metrics"]
        );
    }
    Ok(())
}
