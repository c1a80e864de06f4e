//! A sentence that compares measured values is a claim the build checks
//! (`book::claims`): this rule flags a sentence of a page or a quiz that
//! quotes two or more `{{#value}}`s beside a comparison word ("more", "than",
//! "none", "did not") without being written as a `{{#claim}}`.
//!
//! A sentence is read simply: a paragraph's lines joined, cut at ". ", "? ",
//! "! ", and at every line that starts a block of its own (a list item, a
//! heading, a table row, a TOML key or table). A claim's own text is one
//! word, so its sentence and values are not counted again; fenced code and
//! table rows are skipped, and a directive preceded by a backslash is text.

use super::Problems;
use crate::book::directive::scan;

/// Words that say one measured value stands in some relation to another.
const COMPARISON_WORDS: &[&str] = &[
    "more", "fewer", "less", "above", "below", "than", "times", "higher", "lower", "faster",
    "slower", "longer", "shorter", "none", "every", "all", "twice", "half", "same", "equal",
    "against", "versus", "vs", "larger", "smaller", "exceeds", "double",
];

/// Two-word comparisons.
const COMPARISON_PHRASES: &[&str] = &["did not"];

/// What stands for a `{{#value}}` in a sentence (a character no page uses).
const VALUE: char = '\u{1}';

/// One sentence: the line of the page it starts on, and its text with every
/// `{{#value}}` replaced by [`VALUE`].
#[derive(Debug, PartialEq)]
struct Sentence {
    line: usize,
    text: String,
}

/// Checks one page or quiz: `page` is its path under book/ (`dns.md`,
/// `quizzes/dns.toml`).
pub(super) fn check_page(page: &str, text: &str, problems: &mut Problems) {
    for sentence in sentences(text) {
        if sentence.text.matches(VALUE).count() >= 2 && compares(&sentence.text) {
            let shown: String = sentence
                .text
                .replace(VALUE, "{{#value}}")
                .chars()
                .take(80)
                .collect();
            problems.add(format!(
                "book/{page}:{}: a sentence compares {{{{#value}}}}s without a {{{{#claim}}}}: {shown}",
                sentence.line
            ));
        }
    }
}

/// Whether the sentence holds a comparison word, as a whole word (a
/// hyphenated word is one word: "half-sent" is not "half").
fn compares(sentence: &str) -> bool {
    let words: Vec<String> = sentence
        .split(|character: char| !character.is_alphanumeric() && character != '-')
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    words
        .iter()
        .any(|word| COMPARISON_WORDS.contains(&word.as_str()))
        || words.windows(2).any(|pair| {
            COMPARISON_PHRASES
                .iter()
                .any(|phrase| *phrase == format!("{} {}", pair[0], pair[1]))
        })
}

/// The page's text with each `{{#value}}` as [`VALUE`], each `{{#fact}}`
/// marker left out, and every other directive (a claim, a chart, an escaped
/// directive) as its bare name,
/// keeping the line breaks a directive spans so line numbers hold.
fn mark_values(text: &str) -> String {
    let mut marked = String::with_capacity(text.len());
    let mut copied = 0;
    // As the preprocessor reads them; one that is not closed ends the marking.
    for directive in scan(text).map_while(Result::ok) {
        // An escaped directive's backslash is not shown.
        let backslash = usize::from(directive.escaped);
        marked.push_str(&text[copied..directive.span.start - backslash]);
        match (directive.escaped, directive.name) {
            (false, "value") => marked.push(VALUE),
            // A fact's marker follows its sentence's full stop; it is no
            // word of either sentence, and must not join them.
            (false, "fact") => {}
            // `{{#claim}}`: its name, without its words.
            _ => marked.push_str(&format!("{{{{#{}}}}}", directive.name)),
        }
        let written = &text[directive.span.clone()];
        marked.extend(written.chars().filter(|character| *character == '\n'));
        copied = directive.span.end;
    }
    marked.push_str(&text[copied..]);
    marked
}

/// Whether a line starts a block of its own, ending the sentence before it.
fn starts_block(line: &str) -> bool {
    let trimmed = line.trim_start();
    let list_number = trimmed.split_once(". ").is_some_and(|(number, _)| {
        !number.is_empty() && number.chars().all(|c| c.is_ascii_digit())
    });
    let toml_key = trimmed.split_once(" = ").is_some_and(|(key, _)| {
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    ["- ", "* ", "+ ", "#", "|", "[", ">"]
        .iter()
        .any(|marker| trimmed.starts_with(marker))
        || list_number
        || toml_key
}

/// A run of lines read as one paragraph: its text joined with spaces, and
/// where in that text each line of the page begins.
#[derive(Default)]
struct Block {
    text: String,
    /// (byte offset in `text`, line number in the page)
    lines: Vec<(usize, usize)>,
}

impl Block {
    fn push(&mut self, line: usize, text: &str) {
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        self.lines.push((self.text.len(), line));
        self.text.push_str(text);
    }

    /// The page's line that holds the block's byte `offset`.
    fn line_at(&self, offset: usize) -> usize {
        self.lines
            .iter()
            .take_while(|(start, _)| *start <= offset)
            .last()
            .map_or(0, |(_, line)| *line)
    }

    /// The block cut at ". ", "? " and "! ".
    fn sentences(&self) -> impl Iterator<Item = Sentence> + '_ {
        let bytes = self.text.as_bytes();
        let mut ends: Vec<usize> = (0..bytes.len())
            .filter(|&index| {
                matches!(bytes[index], b'.' | b'?' | b'!') && bytes.get(index + 1) == Some(&b' ')
            })
            .map(|index| index + 1)
            .collect();
        ends.push(bytes.len());
        let starts = std::iter::once(0).chain(ends.clone());
        starts.zip(ends).filter_map(|(start, end)| {
            let piece = &self.text[start..end];
            let skipped = piece.len() - piece.trim_start().len();
            let text = piece.trim();
            (!text.is_empty()).then(|| Sentence {
                line: self.line_at(start + skipped),
                text: text.to_string(),
            })
        })
    }
}

/// The sentences of a page, each with the line it starts on.
fn sentences(text: &str) -> Vec<Sentence> {
    let marked = mark_values(text);
    let mut blocks: Vec<Block> = Vec::new();
    let mut in_code = false;
    let mut open = false;
    for (index, line) in marked.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_code = !in_code;
            open = false;
            continue;
        }
        // A table row lists values under its column's label; it is not a
        // sentence (a comparison belongs in the prose around the table).
        if in_code || trimmed.is_empty() || trimmed.starts_with('|') {
            open = false;
            continue;
        }
        if !open || starts_block(line) {
            blocks.push(Block::default());
        }
        if let Some(block) = blocks.last_mut() {
            block.push(index + 1, trimmed);
        }
        open = true;
    }
    blocks.iter().flat_map(Block::sentences).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flagged(text: &str) -> Vec<String> {
        let mut problems = Problems::default();
        check_page("demo.md", text, &mut problems);
        problems.0
    }

    #[test]
    fn a_sentence_comparing_two_values_without_a_claim_is_flagged() {
        let text = "Intro.\n\nThe pool opened {{#value demo a n}} connections, \
                    more than the {{#value demo b n}} of the fix. Next one.\n";
        let found = flagged(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "book/demo.md:3: a sentence compares {{#value}}s without a {{#claim}}: \
                 The pool opened {{#value}} connections, more than"
            ),
            "{found:?}"
        );
        // "did not", across a line break, on the line the sentence starts.
        let found = flagged("One.\nIt did not\nmove: {{#value demo a n}} and {{#value demo b n}}.");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("book/demo.md:2:"), "{found:?}");
    }

    #[test]
    fn a_claim_one_value_or_no_comparison_word_is_not_flagged() {
        for text in [
            // Written as a claim: its values are the claim's.
            "{{#claim demo a:n > b:n | {left} is more than {right}}}, more than {{#value demo c n}}.",
            // One value.
            "It opened {{#value demo a n}} connections, more than it needs.",
            // Two values, no comparison: a list of two numbers.
            "It opened {{#value demo a n}} connections in {{#value demo b s}} s.",
            // Two sentences, each with one value.
            "It opened {{#value demo a n}}. The fix opened more: {{#value demo b n}}.",
            // A fact's marker after the full stop does not join them.
            "It opened {{#value demo a n}}.{{#fact x}} The fix opened more: {{#value demo b n}}.",
            // Escaped directives are text about directives.
            "Write \\{{#value demo a n}} or \\{{#value demo b n}}, more than once.",
            // Code is not prose.
            "```\nmore {{#value demo a n}} than {{#value demo b n}}\n```",
            // A table row is not a sentence.
            "| p99 below / above | {{#value demo a n}} / {{#value demo b n}} |",
            // "Allows" holds "all" but is not the word, nor is "half-sent".
            "It allows {{#value demo a n}} and {{#value demo b n}}.",
            "A half-sent head {{#value demo a n}}, an idle one {{#value demo b n}}.",
        ] {
            assert_eq!(flagged(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn list_items_headings_and_toml_keys_end_a_sentence() {
        let list = "- first {{#value demo a n}} ms\n- then all {{#value demo b n}} ms\n";
        assert_eq!(flagged(list), Vec::<String>::new());
        let list = "1. first {{#value demo a n}} ms\n2. then all {{#value demo b n}} ms\n";
        assert_eq!(flagged(list), Vec::<String>::new());
        let quiz = "text = \"{{#value demo a n}} requests\"\n\
                    why = \"Fewer than {{#value demo b n}} requests\"\n";
        assert_eq!(flagged(quiz), Vec::<String>::new());
        let quiz = "why = \"{{#value demo a n}} is fewer than {{#value demo b n}}\"\n";
        assert_eq!(flagged(quiz).len(), 1);
        let item = "- first {{#value demo a n}} ms,\n  then more: {{#value demo b n}} ms\n";
        let found = flagged(item);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("book/demo.md:1:"), "{found:?}");
    }

    #[test]
    fn sentences_split_on_their_ends() {
        let found = sentences("A is 1. B is 2? C is 3! D is 2.5 s\nlong.\n\nE.");
        let texts: Vec<&str> = found.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(
            texts,
            ["A is 1.", "B is 2?", "C is 3!", "D is 2.5 s long.", "E."]
        );
        assert_eq!(found[3].line, 1);
        assert_eq!(found[4].line, 4);
    }
}
