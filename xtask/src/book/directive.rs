//! The one reader of the `{{#name args}}` directives of a page: the book's
//! preprocessor (`book::directives`), the tidy checks, the workshop's
//! minutes and the stale-run check all find directives here, so they agree
//! on what one is. A directive runs from `{{#` to the first `}}`, and over
//! any `}` right after it (a claim's sentence may end with `{right}}}`). One
//! preceded by a backslash (`\{{#value ...}}`) is escaped: text about a
//! directive, shown without the backslash, not a directive. A `{{#` that is
//! not escaped and never closed is an error naming its line.

use std::ops::Range;

use anyhow::{Result, anyhow};

/// What opens a directive.
const OPEN: &str = "{{#";
/// What closes one (and any `}` right after it).
const CLOSE: &str = "}}";

/// One directive of a page, as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Directive<'a> {
    /// The word right after `{{#`: `value` in `{{#value demo a/b n}}`.
    pub name: &'a str,
    /// What follows the name, trimmed: `demo a/b n` (empty for `{{#facts}}`).
    pub args: &'a str,
    /// Where it is in the page: from its `{{` to past its closing braces (a
    /// backslash that escapes it is just before the span).
    pub span: Range<usize>,
    /// Its line in the page, from 1.
    pub line: usize,
    /// Whether a backslash escapes it (then it is text, not a directive).
    pub escaped: bool,
}

/// Every directive of `text` in order, escaped ones included (marked): what
/// a reader that rewrites the text (the preprocessor) needs. The first
/// directive that is not closed ends it with an error.
pub fn scan(text: &str) -> Scan<'_> {
    Scan {
        text,
        offset: 0,
        line: 1,
        counted_to: 0,
        failed: false,
    }
}

/// The directives of `text`, escaped ones left out (they are text). The first
/// directive that is not closed ends it with an error.
pub fn directives(text: &str) -> impl Iterator<Item = Result<Directive<'_>>> {
    scan(text).filter(|found| !found.as_ref().is_ok_and(|directive| directive.escaped))
}

/// The directives of `text` before the first that is not closed, escaped ones
/// left out: for a check that reads what it can (tidy's includes check names
/// the directive that is not closed).
pub fn well_formed(text: &str) -> impl Iterator<Item = Directive<'_>> {
    directives(text).map_while(Result::ok)
}

/// The iterator [`scan`] returns.
pub struct Scan<'a> {
    text: &'a str,
    /// Where the search for the next `{{#` starts.
    offset: usize,
    /// The line of `counted_to`.
    line: usize,
    counted_to: usize,
    /// After an error, nothing more is read.
    failed: bool,
}

impl Scan<'_> {
    fn line_of(&mut self, position: usize) -> usize {
        self.line += self.text[self.counted_to..position].matches('\n').count();
        self.counted_to = position;
        self.line
    }
}

impl<'a> Iterator for Scan<'a> {
    type Item = Result<Directive<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let text = self.text;
        let start = self.offset + text[self.offset..].find(OPEN)?;
        let line = self.line_of(start);
        let escaped = text[..start].ends_with('\\');
        let after_open = start + OPEN.len();
        let Some(close) = text[after_open..]
            .find(CLOSE)
            .map(|close| after_open + close)
        else {
            // Never closed: an escaped one is text up to its name, anything
            // else an error.
            let name_length = text[after_open..]
                .find(|c: char| c.is_whitespace() || c == '}')
                .unwrap_or(text.len() - after_open);
            let name = &text[after_open..after_open + name_length];
            if escaped {
                self.offset = after_open + name_length;
                return Some(Ok(Directive {
                    name,
                    args: "",
                    span: start..self.offset,
                    line,
                    escaped,
                }));
            }
            self.failed = true;
            return Some(Err(anyhow!(
                "line {line}: {{{{#{name} is not closed with }}}}"
            )));
        };
        let extra = text[close + CLOSE.len()..]
            .chars()
            .take_while(|c| *c == '}')
            .count();
        let end = close + CLOSE.len() + extra;
        self.offset = end;
        // The closing braces a claim's sentence ends with: `{right}}}` keeps
        // its `}`.
        let inner = &text[after_open..end - CLOSE.len()];
        let name = inner.split(char::is_whitespace).next().unwrap_or_default();
        Some(Ok(Directive {
            name,
            args: inner[name.len()..].trim(),
            span: start..end,
            line,
            escaped,
        }))
    }
}

/// One `{{#chart ...}}`, `{{#table ...}}`, `{{#value ...}}` or `{{#claim ...}}`
/// in a page.
#[derive(Debug, PartialEq)]
pub(crate) struct DataDirective<'a> {
    /// The directive: its `name` is `chart`, `table`, `value` or `claim`, its
    /// `args` `<slug> <series> <field>` for a value.
    pub(crate) directive: Directive<'a>,
    /// The lab it reads: the slug before the `/` of a chart, the first word
    /// of a table, a value or a claim (`doctor` in `doctor@full`).
    pub(crate) lab: &'a str,
    /// It reads the lab's committed full run (`<slug>@full`), not the run
    /// the book is built from.
    pub(crate) full: bool,
}

/// The data directives of a page, as the book's preprocessor reads them
/// (this module's [`well_formed`]): a directive preceded by a backslash is text, not a
/// directive; reading stops at one that is not closed (the includes check
/// names it).
pub(crate) fn data_directives(text: &str) -> Vec<DataDirective<'_>> {
    well_formed(text)
        .filter_map(|directive| {
            let target = directive.args.split_whitespace().next()?;
            let lab = match directive.name {
                "chart" => target.split('/').next().unwrap_or(target),
                "table" | "value" | "claim" => target,
                _ => return None,
            };
            let (lab, full) = match lab.strip_suffix(super::FULL_SUFFIX) {
                Some(lab) => (lab, true),
                None => (lab, false),
            };
            Some(DataDirective {
                directive,
                lab,
                full,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<Directive<'_>> {
        scan(text).collect::<Result<_>>().unwrap()
    }

    #[test]
    fn a_directive_has_a_name_arguments_a_span_and_a_line() {
        let text = "one\ntwo {{#value demo a/b n}} and {{#facts}}.\n";
        let found = all(text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].name, "value");
        assert_eq!(found[0].args, "demo a/b n");
        assert_eq!(&text[found[0].span.clone()], "{{#value demo a/b n}}");
        assert_eq!(found[0].line, 2);
        assert!(!found[0].escaped);
        assert_eq!((found[1].name, found[1].args), ("facts", ""));
        assert_eq!(&text[found[1].span.clone()], "{{#facts}}");
        assert_eq!(found[1].line, 2);
    }

    #[test]
    fn several_on_a_line_and_over_lines_keep_their_lines() {
        let text = "{{#fact a}}{{#fact b}} {{#chart demo/c}}\n\n{{#quiz demo}}\n";
        let found: Vec<(&str, &str, usize)> = all(text)
            .iter()
            .map(|directive| (directive.name, directive.args, directive.line))
            .collect();
        assert_eq!(
            found,
            [
                ("fact", "a", 1),
                ("fact", "b", 1),
                ("chart", "demo/c", 1),
                ("quiz", "demo", 3)
            ]
        );
    }

    #[test]
    fn an_escaped_directive_is_text() {
        let text = "write \\{{#value demo a n}} to quote {{#value demo b n}}";
        let found = all(text);
        assert_eq!(found.len(), 2);
        assert!(found[0].escaped);
        assert_eq!(
            &text[found[0].span.start - 1..found[0].span.end],
            "\\{{#value demo a n}}"
        );
        let real: Vec<Directive<'_>> = directives(text).collect::<Result<_>>().unwrap();
        assert_eq!(real.len(), 1);
        assert_eq!(real[0].args, "demo b n");
        // Escaped and never closed: text too, not an error.
        let open = all("the \\{{#chart opener");
        assert_eq!(open.len(), 1);
        assert!(open[0].escaped && open[0].name == "chart");
        assert_eq!(directives("the \\{{#chart opener").count(), 0);
    }

    #[test]
    fn braces_in_the_arguments_stay_in_them() {
        let text = "{{#claim demo a:n > b:n | {left} is more than {right}}} then {{#fact x}}";
        let found = all(text);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            found[0].args,
            "demo a:n > b:n | {left} is more than {right}"
        );
        assert_eq!(
            &text[found[0].span.clone()],
            "{{#claim demo a:n > b:n | {left} is more than {right}}}"
        );
        assert_eq!(found[1].name, "fact");
    }

    #[test]
    fn a_directive_that_is_not_closed_names_its_line() {
        let text = "{{#fact a}}\n\nthen {{#value demo a n and on\nto the end {{#fact b";
        let mut found = scan(text);
        assert_eq!(found.next().unwrap().unwrap().name, "fact");
        let error = format!("{:#}", found.next().unwrap().unwrap_err());
        assert_eq!(error, "line 3: {{#value is not closed with }}");
        assert!(found.next().is_none());
        assert_eq!(well_formed(text).count(), 1);
    }
}
