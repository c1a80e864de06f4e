// Workshop modes, for whoever runs the session:
// - speaker notes ({{#notes <slug>}}): hidden from readers; `n` or the
//   "Notes" button shows and hides them;
// - projector mode: larger type, a wider column, one section per screen;
//   `p` or the "Projector" button.
// Both are classes on <html>, remembered in this browser's localStorage so
// they stay on from page to page. Print shows the notes only when they are
// on (the CSS's print rules follow the same class). No network.
(() => {
  'use strict';

  const modes = {
    notes: { key: 'n', label: 'Notes', title: 'Show or hide the speaker notes (n)' },
    projector: { key: 'p', label: 'Projector', title: 'Projector mode: large type, one section per screen (p)' },
  };
  const storageKey = (mode) => `labbook-presenter:${mode}`;
  const root = document.documentElement;
  const buttons = {};

  const stored = (mode) => {
    try { return localStorage.getItem(storageKey(mode)) === 'on'; } catch (_) { return false; }
  };
  const store = (mode, on) => {
    try { localStorage.setItem(storageKey(mode), on ? 'on' : 'off'); } catch (_) { /* storage off: the mode lasts this page */ }
  };

  // Projector mode groups each h2 and what follows it into a <section> that
  // fills the screen; leaving the mode takes the groups apart again.
  const main = () => document.querySelector('#mdbook-content main') || document.querySelector('main');
  const makeSlides = () => {
    const content = main();
    if (!content || content.querySelector(':scope > section.slide')) return;
    let slide = document.createElement('section');
    slide.className = 'slide';
    const slides = [slide];
    for (const node of [...content.childNodes]) {
      if (node.nodeName === 'H2' && slide.childNodes.length > 0) {
        slide = document.createElement('section');
        slide.className = 'slide';
        slides.push(slide);
      }
      slide.appendChild(node);
    }
    slides.forEach((each) => content.appendChild(each));
  };
  const unmakeSlides = () => {
    const content = main();
    if (!content) return;
    for (const slide of content.querySelectorAll(':scope > section.slide')) {
      slide.replaceWith(...slide.childNodes);
    }
  };

  const set = (mode, on) => {
    root.classList.toggle(mode, on);
    if (mode === 'projector') (on ? makeSlides : unmakeSlides)();
    if (buttons[mode]) buttons[mode].setAttribute('aria-pressed', on ? 'true' : 'false');
    store(mode, on);
  };
  const toggle = (mode) => set(mode, !root.classList.contains(mode));

  const addButtons = () => {
    const bar = document.querySelector('.right-buttons');
    if (!bar) return;
    for (const [mode, { label, title }] of Object.entries(modes)) {
      const button = document.createElement('button');
      button.type = 'button';
      button.className = `presenter-button presenter-${mode}`;
      button.textContent = label;
      button.title = title;
      button.setAttribute('aria-pressed', root.classList.contains(mode) ? 'true' : 'false');
      button.addEventListener('click', () => toggle(mode));
      bar.prepend(button);
      buttons[mode] = button;
    }
  };

  const addHelp = () => {
    const help = document.querySelector('#mdbook-help-popup');
    if (!help) return;
    const lines = [['n', 'to show or hide the speaker notes'], ['p', 'for projector mode']];
    for (const [key, what] of lines) {
      const line = document.createElement('p');
      line.innerHTML = `Press <kbd>${key.toUpperCase()}</kbd> ${what}`;
      help.appendChild(line);
    }
  };

  document.addEventListener('keydown', (event) => {
    if (event.ctrlKey || event.altKey || event.metaKey || event.shiftKey) return;
    const target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    for (const [mode, { key }] of Object.entries(modes)) {
      if (event.key === key) {
        toggle(mode);
        event.preventDefault();
      }
    }
  });

  const start = () => {
    for (const mode of Object.keys(modes)) if (stored(mode)) set(mode, true);
    addButtons();
    addHelp();
  };
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
