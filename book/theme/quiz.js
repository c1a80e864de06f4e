// The chapters' quizzes ({{#quiz <slug>}}, rendered by the xtask): check an
// answer, show why every option is right or wrong, and keep each answer in
// this browser's localStorage so the progress survives a reload. No network.
(() => {
  'use strict';

  const storageKey = (quiz, index) => `labbook-quiz:${quiz}:${index}`;
  const remember = (key, value) => {
    try {
      if (value === null) localStorage.removeItem(key);
      else localStorage.setItem(key, JSON.stringify(value));
    } catch (_) {
      // Storage may be off (private windows, file:// in some browsers): the
      // quiz still works, it only forgets on reload.
    }
  };
  const recall = (key) => {
    try {
      const stored = JSON.parse(localStorage.getItem(key));
      return stored && Array.isArray(stored.chosen) ? stored : null;
    } catch (_) {
      return null;
    }
  };

  function setUp(section) {
    const name = section.dataset.quiz;
    const questions = [...section.querySelectorAll('.quiz-question')];
    const progress = section.querySelector('.quiz-progress');
    section.classList.remove('quiz-nojs');

    const inputsOf = (question) => [...question.querySelectorAll('.quiz-option input')];
    const showProgress = () => {
      const right = questions.filter((question) => question.classList.contains('quiz-right')).length;
      const answered = questions.filter((question) => question.classList.contains('quiz-answered')).length;
      progress.textContent = `${right} of ${questions.length} answered right` +
        (answered > right ? `, ${answered - right} to try again` : '');
    };
    const clear = (question) => {
      question.classList.remove('quiz-answered', 'quiz-right', 'quiz-wrong');
      for (const option of question.querySelectorAll('.quiz-option')) {
        option.classList.remove('quiz-picked');
      }
      question.querySelector('.quiz-verdict').textContent = '';
    };
    // Marks the question as answered with the options `chosen` (indices).
    const judge = (question, chosen) => {
      clear(question);
      const options = [...question.querySelectorAll('.quiz-option')];
      const correct = options.flatMap((option, index) => (option.dataset.correct === 'true' ? [index] : []));
      const right = chosen.length === correct.length && correct.every((index) => chosen.includes(index));
      options.forEach((option, index) => option.classList.toggle('quiz-picked', chosen.includes(index)));
      question.classList.add('quiz-answered', right ? 'quiz-right' : 'quiz-wrong');
      question.querySelector('.quiz-verdict').textContent = right
        ? 'Right.'
        : 'Not quite: each option says why below.';
      return right;
    };

    questions.forEach((question, index) => {
      const verdict = question.querySelector('.quiz-verdict');
      question.querySelector('.quiz-check').addEventListener('click', () => {
        const chosen = inputsOf(question).flatMap((input, option) => (input.checked ? [option] : []));
        if (chosen.length === 0) {
          clear(question);
          verdict.textContent = 'Choose an answer first.';
          showProgress();
          return;
        }
        const right = judge(question, chosen);
        remember(storageKey(name, index), { chosen, right });
        showProgress();
      });
      const stored = recall(storageKey(name, index));
      if (stored) {
        inputsOf(question).forEach((input, option) => {
          input.checked = stored.chosen.includes(option);
        });
        judge(question, stored.chosen);
      }
    });
    section.querySelector('.quiz-reset').addEventListener('click', () => {
      questions.forEach((question, index) => {
        clear(question);
        for (const input of inputsOf(question)) input.checked = false;
        remember(storageKey(name, index), null);
      });
      showProgress();
    });
    showProgress();
  }

  const start = () => document.querySelectorAll('section.quiz').forEach(setUp);
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
