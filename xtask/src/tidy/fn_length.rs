//! Strict check: no function in labs/, exercises/, widgets/ or xtask/ is
//! over the house's limit of 100 lines, from its `fn` line to its closing
//! brace, tests included (a function that long does more than one thing; its
//! steps read better as helpers or types with names).
//!
//! A small scanner rather than a parser (the xtask takes no dependency for
//! it): it skips comments, strings and character literals, finds each `fn`
//! item by its keyword and name, and its body by the first `{` outside the
//! signature's parentheses and brackets. A declaration without a body (`fn
//! f();` in a trait) and a function pointer type (`fn(u8)`) are not items.

use super::Problems;

/// The most lines a function may have, its `fn` line and closing brace
/// included.
pub const MAX_LINES: usize = 100;

/// The folders whose functions the rule covers.
const FOLDERS: [&str; 4] = ["labs/", "exercises/", "widgets/", "xtask/"];

/// Checks one file; `relative` is its path from the workspace root.
pub(super) fn check_file(relative: &str, text: &str, problems: &mut Problems) {
    if !FOLDERS.iter().any(|folder| relative.starts_with(folder)) {
        return;
    }
    for function in functions(text) {
        if function.lines > MAX_LINES {
            problems.add(format!(
                "{relative}:{}: fn {} has {} lines, over the limit of {MAX_LINES}: give its steps names (helper functions, or a type whose methods they are)",
                function.line, function.name, function.lines
            ));
        }
    }
}

/// A function with a body: its name, the line of its `fn`, and how many
/// lines it spans.
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// A function whose body is being read: where it started, and the brace
/// depth inside its body.
struct Open {
    name: String,
    line: usize,
    depth: usize,
}

/// A `fn` and its name seen, its body not yet: the depth of parentheses and
/// brackets in its signature so far.
struct Signature {
    name: String,
    line: usize,
    nesting: usize,
}

/// Every function with a body in `source`, in the order they end.
fn functions(source: &str) -> Vec<Function> {
    let chars: Vec<char> = source.chars().collect();
    let mut found = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    let mut signature: Option<Signature> = None;
    let mut after_fn: Option<usize> = None;
    let (mut line, mut depth, mut at) = (1, 0, 0);
    while at < chars.len() {
        let character = chars[at];
        let skipped = skip_literal_or_comment(&chars, at);
        if skipped > at {
            line += chars[at..skipped].iter().filter(|&&c| c == '\n').count();
            at = skipped;
            continue;
        }
        if is_identifier_start(character) {
            let end = identifier_end(&chars, at);
            let word: String = chars[at..end].iter().collect();
            match after_fn.take() {
                Some(fn_line) => {
                    signature = Some(Signature {
                        name: word,
                        line: fn_line,
                        nesting: 0,
                    });
                }
                None if word == "fn" && signature.is_none() => after_fn = Some(line),
                None => {}
            }
            at = end;
            continue;
        }
        if !character.is_whitespace() {
            // `fn` followed by anything but a name: a function pointer type.
            after_fn = None;
        }
        match character {
            '\n' => line += 1,
            '(' | '[' => {
                if let Some(pending) = &mut signature {
                    pending.nesting += 1;
                }
            }
            ')' | ']' => {
                if let Some(pending) = &mut signature {
                    pending.nesting = pending.nesting.saturating_sub(1);
                }
            }
            ';' if signature
                .as_ref()
                .is_some_and(|pending| pending.nesting == 0) =>
            {
                signature = None;
            }
            '{' => {
                depth += 1;
                if let Some(pending) = signature.take_if(|pending| pending.nesting == 0) {
                    open.push(Open {
                        name: pending.name,
                        line: pending.line,
                        depth,
                    });
                }
            }
            '}' => {
                if let Some(function) = open.pop_if(|function| function.depth == depth) {
                    found.push(Function {
                        name: function.name,
                        line: function.line,
                        lines: line - function.line + 1,
                    });
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        at += 1;
    }
    found
}

fn is_identifier_start(character: char) -> bool {
    character.is_alphabetic() || character == '_'
}

fn identifier_end(chars: &[char], from: usize) -> usize {
    let mut end = from;
    while end < chars.len() && (chars[end].is_alphanumeric() || chars[end] == '_') {
        end += 1;
    }
    end
}

/// Where the comment, string or character literal that starts at `at` ends
/// (just past it); `at` itself where none starts there. A lifetime (`'a`)
/// is not a literal.
fn skip_literal_or_comment(chars: &[char], at: usize) -> usize {
    let next = |offset: usize| chars.get(at + offset).copied();
    let in_identifier = at > 0 && (chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
    match (chars[at], next(1)) {
        ('/', Some('/')) => (at..chars.len())
            .find(|&index| chars[index] == '\n')
            .unwrap_or(chars.len()),
        ('/', Some('*')) => block_comment_end(chars, at),
        ('"', _) => quoted_end(chars, at + 1, '"'),
        ('\'', Some('\\')) => quoted_end(chars, at + 1, '\''),
        ('\'', Some(_)) if next(2) == Some('\'') => at + 3,
        ('r', _) if !in_identifier => raw_string_end(chars, at + 1).unwrap_or(at),
        ('b', Some('r')) if !in_identifier => raw_string_end(chars, at + 2).unwrap_or(at),
        _ => at,
    }
}

/// Past the closing `*/` of a block comment, nested ones included.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let (mut nesting, mut at) = (0, start);
    while at + 1 < chars.len() {
        match (chars[at], chars[at + 1]) {
            ('/', '*') => {
                nesting += 1;
                at += 2;
            }
            ('*', '/') => {
                nesting -= 1;
                at += 2;
                if nesting == 0 {
                    return at;
                }
            }
            _ => at += 1,
        }
    }
    chars.len()
}

/// Past the unescaped `close` that ends a string or character literal whose
/// text starts at `from`.
fn quoted_end(chars: &[char], from: usize, close: char) -> usize {
    let mut at = from;
    while at < chars.len() {
        match chars[at] {
            '\\' => at += 2,
            character if character == close => return at + 1,
            _ => at += 1,
        }
    }
    chars.len()
}

/// A raw string whose hashes start at `from` (just after its `r`): past its
/// closing quote and hashes; None where no quote follows the hashes (a raw
/// identifier such as `r#type`, or a plain word).
fn raw_string_end(chars: &[char], from: usize) -> Option<usize> {
    let hashes = chars[from..].iter().take_while(|&&c| c == '#').count();
    if chars.get(from + hashes) != Some(&'"') {
        return None;
    }
    let mut at = from + hashes + 1;
    while at < chars.len() {
        if chars[at] == '"' && chars[at + 1..].iter().take_while(|&&c| c == '#').count() >= hashes {
            return Some(at + 1 + hashes);
        }
        at += 1;
    }
    Some(chars.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_measured_from_fn_to_their_closing_brace() {
        let source = r##"//! demo
trait Shape {
    fn area(&self) -> f64;
}
pub async fn outer(pointer: fn(u8) -> u8, list: [u8; 2]) -> Result<(), ()>
where
    u8: Copy,
{
    let text = "a } in a string { and \" an escaped quote }";
    let raw = r#"a "}" in a raw string"#;
    let (open, close) = ('{', '}');
    let escaped = '\'';
    // a } in a comment
    /* a } in /* a nested */ block comment */
    fn inner<'a>(x: &'a str) -> &'a str {
        x
    }
    let r#type = b'}';
    Ok(())
}
macro_rules! make { ($name:ident) => { fn $name() {} }; }
"##;
        let found = functions(source);
        assert_eq!(
            found,
            [
                Function {
                    name: "inner".to_string(),
                    line: 15,
                    lines: 3
                },
                Function {
                    name: "outer".to_string(),
                    line: 5,
                    lines: 16
                },
            ]
        );
    }

    #[test]
    fn a_function_over_the_limit_is_named_with_its_place() {
        let function = |name: &str, body_lines: usize| {
            format!("fn {name}() {{\n{}}}\n", "    step();\n".repeat(body_lines))
        };
        // 100 lines: the fn line, 98 of body, the closing brace.
        let source = format!(
            "//! demo\n{}{}",
            function("short", MAX_LINES - 2),
            function("long", MAX_LINES - 1)
        );
        let mut problems = Problems::default();
        check_file("labs/demo/src/lib.rs", &source, &mut problems);
        // Outside the four folders, the rule does not apply.
        check_file("facts/src/lib.rs", &source, &mut problems);
        assert_eq!(
            problems.0,
            [
                "labs/demo/src/lib.rs:102: fn long has 101 lines, over the limit of 100: give its steps names (helper functions, or a type whose methods they are)"
            ]
        );
    }
}
