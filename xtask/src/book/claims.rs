//! `{{#claim <slug> <left> <relation> [<factor>x] <right> | <sentence>}}`: a
//! sentence that compares measured values, written as a claim over the data
//! of the run the page shows, so the build checks what the sentence says.
//!
//! - `<left>` and `<right>` are `<series>:<field>` (one field of one summary
//!   record of lab `<slug>`, as `{{#value}}` reads it) or a number;
//! - `<relation>` is `<`, `<=`, `>`, `>=`, `=` or `!=`; with a factor,
//!   `a >= 2x b` says a is at least twice b;
//! - the sentence is Markdown with `{left}` and `{right}` where the two
//!   values go, rendered as `{{#value}}` renders them (a number of the run,
//!   its tooltip naming its source). A sentence must show the measured values
//!   it compares.
//!
//! Built from the reference runs (`cargo xtask test`, `--no-run`), a claim
//! that does not hold is an error: the book does not build. Built from a
//! reader's runs, the sentence stays and a note beside it says that this
//! run contradicts it, and `cargo xtask book` lists such claims at its end.

use std::fmt;

use anyhow::{Context, Result, bail, ensure};

use super::{
    LabData,
    values::{data_value, summary_field},
};

/// How a claim compares its two values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Relation {
    Less,
    AtMost,
    Greater,
    AtLeast,
    Equal,
    NotEqual,
}

impl Relation {
    fn parse(word: &str) -> Result<Relation> {
        Ok(match word {
            "<" => Relation::Less,
            "<=" => Relation::AtMost,
            ">" => Relation::Greater,
            ">=" => Relation::AtLeast,
            "=" => Relation::Equal,
            "!=" => Relation::NotEqual,
            other => bail!("{other:?} is not a relation: use <, <=, >, >=, = or !="),
        })
    }

    fn holds(self, left: f64, right: f64) -> bool {
        match self {
            Relation::Less => left < right,
            Relation::AtMost => left <= right,
            Relation::Greater => left > right,
            Relation::AtLeast => left >= right,
            Relation::Equal => left == right,
            Relation::NotEqual => left != right,
        }
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Relation::Less => "<",
            Relation::AtMost => "<=",
            Relation::Greater => ">",
            Relation::AtLeast => ">=",
            Relation::Equal => "=",
            Relation::NotEqual => "!=",
        })
    }
}

/// One side of a claim: a field of the run, or a number written in the page.
#[derive(Debug, PartialEq)]
enum Operand<'a> {
    Field { series: &'a str, field: &'a str },
    Number(f64),
}

impl<'a> Operand<'a> {
    fn parse(word: &'a str) -> Result<Operand<'a>> {
        if let Ok(number) = word.parse::<f64>() {
            return Ok(Operand::Number(number));
        }
        let (series, field) = word
            .rsplit_once(':')
            .with_context(|| format!("{word:?} is neither a number nor <series>:<field>"))?;
        Ok(Operand::Field { series, field })
    }

    /// The value in the run, and how the sentence shows it.
    fn resolve(&self, slug: &str, lab_data: &LabData) -> Result<(f64, String)> {
        match self {
            Operand::Number(number) => Ok((*number, number.to_string())),
            Operand::Field { series, field } => {
                let value = summary_field(slug, series, field, lab_data)?
                    .as_f64()
                    .with_context(|| format!("{series}:{field} is not a number"))?;
                Ok((value, data_value(slug, series, field, lab_data)?))
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Operand::Number(number) => number.to_string(),
            Operand::Field { series, field } => format!("{series}:{field}"),
        }
    }
}

/// A parsed claim, before it meets the data.
#[derive(Debug, PartialEq)]
struct Claim<'a> {
    slug: &'a str,
    left: Operand<'a>,
    relation: Relation,
    factor: f64,
    right: Operand<'a>,
    sentence: &'a str,
}

impl<'a> Claim<'a> {
    const USAGE: &'static str = "usage: {{#claim <slug> <series>:<field> <relation> [<factor>x] <series>:<field>|<number> | <sentence with {left} and {right}>}}";

    fn parse(text: &'a str) -> Result<Claim<'a>> {
        let (head, sentence) = text.split_once('|').context(Self::USAGE)?;
        let words: Vec<&str> = head.split_whitespace().collect();
        let (slug, left, relation, factor, right) = match words.as_slice() {
            [slug, left, relation, right] => (*slug, *left, *relation, "1x", *right),
            [slug, left, relation, factor, right] => (*slug, *left, *relation, *factor, *right),
            _ => bail!("{}", Self::USAGE),
        };
        let factor: f64 = factor
            .strip_suffix('x')
            .and_then(|number| number.parse().ok())
            .with_context(|| format!("{factor:?} is not a factor such as 2x"))?;
        let claim = Claim {
            slug,
            left: Operand::parse(left)?,
            relation: Relation::parse(relation)?,
            factor,
            right: Operand::parse(right)?,
            sentence: sentence.trim(),
        };
        ensure!(
            claim.sentence.contains("{left}"),
            "the sentence must show the value it compares: put {{left}} where it goes"
        );
        if matches!(claim.right, Operand::Field { .. }) {
            ensure!(
                claim.sentence.contains("{right}"),
                "the sentence must show both measured values: put {{right}} where it goes"
            );
        }
        Ok(claim)
    }

    /// What the claim says, in one line: `a:b (3) < 2x c:d (1)`.
    fn statement(&self, left: f64, right: f64) -> String {
        let factor = if self.factor == 1.0 {
            String::new()
        } else {
            format!("{}x ", self.factor)
        };
        let shown = |number: f64| lab_kit::Value::Num(number).display();
        let (left, right) = (shown(left), shown(right));
        format!(
            "{} ({left}) {} {factor}{} ({right})",
            self.left.name(),
            self.relation,
            self.right.name()
        )
    }
}

/// The rendered sentence, or an error when the claim does not hold and the
/// book is built from the reference runs.
pub(super) fn expand(text: &str, lab_data: &LabData) -> Result<String> {
    let claim = Claim::parse(text)?;
    let (left, left_shown) = claim.left.resolve(claim.slug, lab_data)?;
    let (right, right_shown) = claim.right.resolve(claim.slug, lab_data)?;
    let sentence = claim
        .sentence
        .replace("{left}", &left_shown)
        .replace("{right}", &right_shown);
    let statement = claim.statement(left, right);
    if claim.relation.holds(left, claim.factor * right) {
        return Ok(format!(
            "<span class=\"lab-claim\" title=\"checked against the run: {statement}\">{sentence}</span>"
        ));
    }
    if lab_data.enforce_claims {
        bail!(
            "this claim does not hold on the run in {}: {statement}",
            lab_data.data_dir.display()
        );
    }
    lab_data
        .contradicted
        .borrow_mut()
        .push((claim.slug.to_string(), statement.clone()));
    Ok(format!(
        "{sentence} <span class=\"lab-claim-broken\" title=\"{statement}\">(your run: \
         {left_shown} and {right_shown}; this sentence does not hold for it)</span>"
    ))
}

/// `cargo xtask book`'s last lines: per chapter, the claims the reader's run
/// contradicts.
pub fn report(contradicted: &[(String, String)]) -> Vec<String> {
    let mut slugs: Vec<&str> = Vec::new();
    for (slug, _) in contradicted {
        if !slugs.contains(&slug.as_str()) {
            slugs.push(slug);
        }
    }
    slugs
        .into_iter()
        .map(|slug| {
            let claims: Vec<&str> = contradicted
                .iter()
                .filter(|(of, _)| of == slug)
                .map(|(_, statement)| statement.as_str())
                .collect();
            format!(
                "{slug}: your run contradicts {} claim(s) of its chapter: {}",
                claims.len(),
                claims.join("; ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_names_its_values_its_relation_and_its_sentence() {
        let claim =
            Claim::parse("demo a/b:n >= 2x twice:n | {left} is at least twice {right}").unwrap();
        assert_eq!(claim.slug, "demo");
        assert_eq!(
            claim.left,
            Operand::Field {
                series: "a/b",
                field: "n"
            }
        );
        assert_eq!(claim.relation, Relation::AtLeast);
        assert_eq!(claim.factor, 2.0);
        assert_eq!(claim.sentence, "{left} is at least twice {right}");
        assert_eq!(
            Claim::parse("demo a:n < 5 | only {left}").unwrap().right,
            Operand::Number(5.0)
        );
        for (text, says) in [
            ("demo a:n < b:n", "usage: {{#claim"),
            ("demo a:n ~ b:n | {left} {right}", "not a relation"),
            ("demo a:n < 2 b:n | {left} {right}", "not a factor"),
            ("demo a < b:n | {left} {right}", "neither a number nor"),
            ("demo a:n < b:n | no numbers", "must show the value"),
            ("demo a:n < b:n | only {left}", "must show both"),
        ] {
            let error = format!("{:#}", Claim::parse(text).unwrap_err());
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn relations_hold_as_written() {
        assert!(Relation::Less.holds(1.0, 2.0) && !Relation::Less.holds(2.0, 2.0));
        assert!(Relation::AtMost.holds(2.0, 2.0) && !Relation::AtMost.holds(3.0, 2.0));
        assert!(Relation::Greater.holds(3.0, 2.0) && !Relation::Greater.holds(2.0, 2.0));
        assert!(Relation::AtLeast.holds(2.0, 2.0) && !Relation::AtLeast.holds(1.0, 2.0));
        assert!(Relation::Equal.holds(2.0, 2.0) && !Relation::Equal.holds(1.0, 2.0));
        assert!(Relation::NotEqual.holds(1.0, 2.0) && !Relation::NotEqual.holds(2.0, 2.0));
    }

    #[test]
    fn the_report_has_one_line_per_chapter() {
        let lines = report(&[
            ("conn-reuse".into(), "a (3) < b (1)".into()),
            ("conn-reuse".into(), "c (2) = 1 (1)".into()),
            ("dns".into(), "d (0) > 0 (0)".into()),
            ("conn-reuse".into(), "e (1) > 2 (2)".into()),
        ]);
        assert_eq!(
            lines,
            [
                "conn-reuse: your run contradicts 3 claim(s) of its chapter: a (3) < b (1); c (2) = 1 (1); e (1) > 2 (2)",
                "dns: your run contradicts 1 claim(s) of its chapter: d (0) > 0 (0)",
            ]
        );
    }
}
