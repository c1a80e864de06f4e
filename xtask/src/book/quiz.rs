//! `{{#quiz <slug>}}`: the questions at the end of a lab's chapter, read from
//! `book/quizzes/<slug>.toml` and rendered as one HTML block that
//! `book/theme/quiz.js` makes interactive (answers, explanations, progress in
//! the browser's localStorage). Without JavaScript, and in print, every
//! explanation shows and the right options are marked.
//!
//! A quiz file is a list of questions:
//!
//! ```toml
//! [[question]]
//! prompt = "How many connections did a client per request open?"
//! multiple = false          # true: check every right option
//! [[question.option]]
//! text = "One per request"
//! correct = true
//! why = "Each client has its own pool, dropped with it."
//! ```
//!
//! Prompts, options and explanations are inline Markdown and may quote the
//! chapter's own run with `{{#value <slug> <series> <field>}}`.

use std::{fs, ops::RangeInclusive, path::Path};

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

/// How many questions a quiz holds: enough to cover a chapter's mechanisms,
/// few enough to answer in five minutes.
pub const QUESTIONS: RangeInclusive<usize> = 5..=8;
const OPTIONS: RangeInclusive<usize> = 2..=6;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuizFile {
    pub question: Vec<Question>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub prompt: String,
    #[serde(default)]
    pub multiple: bool,
    pub option: Vec<QuizOption>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuizOption {
    pub text: String,
    #[serde(default)]
    pub correct: bool,
    pub why: String,
}

/// Reads and checks `book/quizzes/<slug>.toml`: the number of questions and
/// options, one right option for a single-choice question and at least one
/// for a multiple-choice one, an explanation for every option, and values
/// quoted only from the chapter's own lab.
pub fn load(book_dir: &Path, slug: &str) -> Result<QuizFile> {
    let path = book_dir.join("quizzes").join(format!("{slug}.toml"));
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let quiz: QuizFile =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    check(&quiz, slug).with_context(|| format!("in {}", path.display()))?;
    Ok(quiz)
}

fn count_within(range: &RangeInclusive<usize>, count: usize, what: &str) -> Result<()> {
    ensure!(
        range.contains(&count),
        "{count} {what} ({} to {} allowed)",
        range.start(),
        range.end()
    );
    Ok(())
}

fn check(quiz: &QuizFile, slug: &str) -> Result<()> {
    count_within(&QUESTIONS, quiz.question.len(), "questions in the quiz")?;
    for (index, question) in quiz.question.iter().enumerate() {
        let number = index + 1;
        ensure!(
            !question.prompt.trim().is_empty(),
            "question {number} has no prompt"
        );
        let what = format!("options in question {number}");
        count_within(&OPTIONS, question.option.len(), &what)?;
        let right = question
            .option
            .iter()
            .filter(|option| option.correct)
            .count();
        match (question.multiple, right) {
            (false, 1) => {}
            (false, _) => bail!(
                "question {number} is single choice with {right} right options (set multiple = true, or mark one)"
            ),
            (true, 0) => bail!("question {number} has no right option"),
            (true, _) => {}
        }
        for (option_index, option) in question.option.iter().enumerate() {
            ensure!(
                !option.text.trim().is_empty() && !option.why.trim().is_empty(),
                "question {number}, option {}: every option has a text and a why",
                option_index + 1
            );
        }
        let texts = std::iter::once(&question.prompt).chain(
            question
                .option
                .iter()
                .flat_map(|option| [&option.text, &option.why]),
        );
        for text in texts {
            for quoted in crate::book::directive::data_directives(text) {
                ensure!(
                    quoted.lab == slug,
                    "question {number} quotes lab {:?}: the quiz of {slug} quotes only its own lab's run",
                    quoted.lab
                );
            }
        }
    }
    Ok(())
}

/// The quiz as one HTML block (no blank line inside, so Markdown leaves it
/// whole). `inline` turns a text (after the book's own directives) into
/// inline HTML.
pub fn render(
    slug: &str,
    quiz: &QuizFile,
    mut inline: impl FnMut(&str) -> Result<String>,
) -> Result<String> {
    let mut html = format!(
        "\n<section class=\"quiz quiz-nojs\" data-quiz=\"{slug}\" aria-label=\"Quiz\">\n<ol class=\"quiz-questions\">\n"
    );
    for (index, question) in quiz.question.iter().enumerate() {
        let number = index + 1;
        let input = if question.multiple {
            "checkbox"
        } else {
            "radio"
        };
        let hint = if question.multiple {
            " <span class=\"quiz-hint\">(choose every right answer)</span>"
        } else {
            ""
        };
        html.push_str(&format!(
            "<li class=\"quiz-question\" data-multiple=\"{}\">\n<div class=\"quiz-prompt\">{}{hint}</div>\n<ul class=\"quiz-options\">\n",
            question.multiple,
            inline(&question.prompt).with_context(|| format!("question {number}"))?
        ));
        for (option_index, option) in question.option.iter().enumerate() {
            let correct = if option.correct {
                " data-correct=\"true\""
            } else {
                ""
            };
            html.push_str(&format!(
                "<li class=\"quiz-option\"{correct}><label><input type=\"{input}\" name=\"quiz-{slug}-{number}\" value=\"{option_index}\"> <span>{}</span></label><div class=\"quiz-why\">{}</div></li>\n",
                inline(&option.text).with_context(|| format!("question {number}"))?,
                inline(&option.why).with_context(|| format!("question {number}"))?
            ));
        }
        html.push_str(
            "</ul>\n<p class=\"quiz-actions\"><button type=\"button\" class=\"quiz-check\">Check</button> <span class=\"quiz-verdict\" role=\"status\"></span></p>\n</li>\n",
        );
    }
    html.push_str(
        "</ol>\n<p class=\"quiz-footer\"><span class=\"quiz-progress\" role=\"status\"></span> <button type=\"button\" class=\"quiz-reset\">Start again</button></p>\n</section>\n\n",
    );
    Ok(html)
}

/// Inline Markdown (code, emphasis, links) as HTML, without the paragraph
/// around it and without line breaks, so it stays inside one HTML block.
pub fn inline_markdown(text: &str) -> String {
    let parser = pulldown_cmark::Parser::new(text.trim());
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, parser);
    let html = html.trim();
    let html = html
        .strip_prefix("<p>")
        .and_then(|rest| rest.strip_suffix("</p>"))
        .filter(|inner| !inner.contains("<p>"))
        .unwrap_or(html);
    html.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiz(text: &str) -> Result<QuizFile> {
        let quiz: QuizFile = toml::from_str(text)?;
        check(&quiz, "demo")?;
        Ok(quiz)
    }

    fn question(multiple: bool, right: &[bool], extra: &str) -> String {
        let mut text = format!("[[question]]\nprompt = \"Q {extra}\"\nmultiple = {multiple}\n");
        for (index, correct) in right.iter().enumerate() {
            text.push_str(&format!(
                "[[question.option]]\ntext = \"option {index}\"\ncorrect = {correct}\nwhy = \"because {index}\"\n"
            ));
        }
        text
    }

    fn five(last: &str) -> String {
        let mut text = question(false, &[true, false], "").repeat(4);
        text.push_str(last);
        text
    }

    #[test]
    fn a_well_formed_quiz_renders_every_option_and_its_why() {
        let parsed = quiz(&five(&question(true, &[true, true, false], ""))).expect("valid");
        let html = render("demo", &parsed, |text| Ok(inline_markdown(text))).expect("renders");
        assert_eq!(html.matches("class=\"quiz-question\"").count(), 5);
        assert_eq!(html.matches("class=\"quiz-why\"").count(), 11);
        assert_eq!(html.matches("data-correct=\"true\"").count(), 6);
        assert_eq!(html.matches("type=\"checkbox\"").count(), 3);
        assert!(
            !html.trim().contains("\n\n"),
            "a blank line would end the HTML block"
        );
    }

    #[test]
    fn a_malformed_quiz_names_what_is_wrong() {
        let error = |text: &str| format!("{:#}", quiz(text).expect_err("refused"));
        assert!(error(&question(false, &[true, false], "")).contains("1 questions"));
        assert!(error(&five(&question(false, &[true, true], ""))).contains("single choice with 2"));
        assert!(error(&five(&question(true, &[false, false], ""))).contains("no right option"));
        assert!(error(&five(&question(false, &[true], ""))).contains("1 options"));
        assert!(
            error(&five(&question(
                false,
                &[true, false],
                "{{#value other s n}}"
            )))
            .contains("quotes lab \"other\"")
        );
        assert!(
            error(&five(
                &question(false, &[true, false], "").replace("why", "wy")
            ))
            .contains("wy")
        );
    }

    #[test]
    fn inline_markdown_keeps_code_and_drops_the_paragraph() {
        assert_eq!(
            inline_markdown("a `Client` per *request*"),
            "a <code>Client</code> per <em>request</em>"
        );
    }
}
