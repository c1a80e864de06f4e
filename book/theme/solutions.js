// The exercises' solutions sit folded (<details class="solution">) under each
// task. A printed page cannot be unfolded, so print opens them, and closes
// again afterwards the ones the reader had not opened.
(() => {
  'use strict';
  let opened = [];
  window.addEventListener('beforeprint', () => {
    opened = [...document.querySelectorAll('details.solution:not([open])')];
    opened.forEach((details) => { details.open = true; });
  });
  window.addEventListener('afterprint', () => {
    opened.forEach((details) => { details.open = false; });
    opened = [];
  });
})();
