//! The book's own directives, expanded from the lab data before mdBook sees
//! a chapter: `{{#chart}}`, `{{#table}}`, `{{#value}}`, `{{#claim}}`,
//! `{{#fact}}`, `{{#widget}}` and the rest (see the module above for what
//! each becomes). A directive preceded by a
//! backslash is left as text (without the backslash). `super::directive`
//! finds them.

use anyhow::{Context, Result, bail, ensure};

use super::{
    LabData, claims, directive, facts, quiz,
    values::{data_value, html_escape},
    workshop,
};
use crate::{
    charts::{self, THEMES},
    data::{Clock, PointKind},
};

/// The directives this preprocessor expands; any other (`{{#include}}`) is
/// left for mdBook.
const OURS: [&str; 12] = [
    "chart", "table", "value", "claim", "widget", "quiz", "duration", "agenda", "notes", "compare",
    "fact", "facts",
];

/// Replaces every directive in `text`.
pub fn expand(text: &str, to_root: &str, lab_data: &LabData) -> Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for found in directive::scan(text) {
        let found = found?;
        if !OURS.contains(&found.name) {
            // Someone else's directive ({{#include}}), escaped or not: left
            // as written for mdBook.
            continue;
        }
        let written = &text[found.span.clone()];
        if found.escaped {
            out.push_str(&text[copied..found.span.start - 1]);
            out.push_str(written);
        } else {
            out.push_str(&text[copied..found.span.start]);
            let expanded = expand_one(found.name, found.args, to_root, lab_data)
                .with_context(|| format!("line {}: {written}", found.line))?;
            out.push_str(&expanded);
        }
        copied = found.span.end;
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

fn expand_one(name: &str, args: &str, to_root: &str, lab_data: &LabData) -> Result<String> {
    let mut words = args.split_whitespace();
    match name {
        "claim" => claims::expand(args, lab_data),
        "chart" => {
            let target = words.next().context("usage: {{#chart <slug>/<name>}}")?;
            ensure!(
                words.next().is_none(),
                "usage: {{{{#chart <slug>/<name>}}}}"
            );
            chart_figure(target, to_root, lab_data)
        }
        "table" => table(words, to_root, lab_data),
        "value" => {
            let usage = "usage: {{#value <slug> <series> <field>}}";
            let (Some(slug), Some(series), Some(field), None) =
                (words.next(), words.next(), words.next(), words.next())
            else {
                bail!("{usage}");
            };
            data_value(slug, series, field, lab_data)
        }
        "widget" => {
            let name = words.next().context("usage: {{#widget <name>}}")?;
            ensure!(words.next().is_none(), "usage: {{{{#widget <name>}}}}");
            widget(name, to_root, lab_data)
        }
        "duration" => {
            let rest: Vec<&str> = words.collect();
            Ok(workshop::Minutes::parse(&rest.join(" "))?.render())
        }
        "agenda" => {
            let name = words.next().context("usage: {{#agenda <name>}}")?;
            ensure!(words.next().is_none(), "usage: {{{{#agenda <name>}}}}");
            Ok(workshop::Agenda::load(&lab_data.book_dir, name)?.render())
        }
        "notes" => {
            let slug = words.next().context("usage: {{#notes <slug>}}")?;
            ensure!(words.next().is_none(), "usage: {{{{#notes <slug>}}}}");
            speaker_notes(slug, to_root, lab_data)
        }
        "fact" => {
            let usage = "usage: {{#fact <id>}}";
            let (Some(id), None) = (words.next(), words.next()) else {
                bail!("{usage}");
            };
            facts::marker(id, to_root, &lab_data.facts)
        }
        "facts" => {
            ensure!(words.next().is_none(), "usage: {{{{#facts}}}}");
            Ok(facts::appendix(&lab_data.facts, &lab_data.fact_versions))
        }
        "compare" => {
            ensure!(words.next().is_none(), "usage: {{{{#compare}}}}");
            Ok(comparison_figures(to_root, lab_data))
        }
        "quiz" => {
            let slug = words.next().context("usage: {{#quiz <slug>}}")?;
            ensure!(words.next().is_none(), "usage: {{{{#quiz <slug>}}}}");
            ensure!(
                lab_data.specs.contains_key(slug),
                "no lab named {slug:?}: a quiz belongs to a lab's chapter"
            );
            let quiz = quiz::load(&lab_data.book_dir, slug)?;
            quiz::render(slug, &quiz, |text| {
                Ok(quiz::inline_markdown(&expand(text, to_root, lab_data)?))
            })
        }
        _ => bail!("unknown directive"),
    }
}

/// `{{#table <slug> <kind> <fields> [series] [clock=...]}}`: a table of the
/// lab's records.
fn table(
    mut words: std::str::SplitWhitespace<'_>,
    to_root: &str,
    lab_data: &LabData,
) -> Result<String> {
    let slug = words.next().context("missing lab slug")?;
    let kind: PointKind = words.next().context("missing record kind")?.parse()?;
    let fields: Vec<&str> = words.next().context("missing fields")?.split(',').collect();
    // Optional, in any order: the series list, and `clock=simulated`
    // for a table of a seeded simulation (its caption then says so), or
    // `clock=real-time` for a part that ran uncompressed, or
    // `clock=rows` for a part on a clock of its own, whose rows each
    // carry the `time_scale` it ran at.
    let mut series: Vec<&str> = Vec::new();
    let mut clock = Clock::Measured;
    for word in words {
        match word.strip_prefix("clock=") {
            Some("simulated") => clock = Clock::Simulated,
            Some("measured") => clock = Clock::Measured,
            Some("real-time") => clock = Clock::RealTime,
            Some("rows") => clock = Clock::Rows,
            Some(other) => {
                bail!(
                    "clock={other}: expected clock=measured, clock=real-time, clock=simulated or clock=rows"
                )
            }
            None if series.is_empty() => series = word.split(',').collect(),
            None => bail!("too many words"),
        }
    }
    super::table::data_table(slug, kind, &fields, &series, clock, to_root, lab_data)
}

/// `{{#widget <name>}}`: the widget's element and the script that loads it.
fn widget(name: &str, to_root: &str, lab_data: &LabData) -> Result<String> {
    ensure!(
        lab_data.widgets.iter().any(|known| known == name),
        "no widget named {name:?} in widgets/"
    );
    Ok(format!(
        "\n<div class=\"lab-widget\" id=\"widget-{name}\" data-widget=\"{name}\">\
         <noscript>This widget needs JavaScript and WebAssembly.</noscript></div>\n\
         <script type=\"module\" src=\"{to_root}widgets/{name}/main.js\"></script>\n"
    ))
}

/// `{{#notes <slug>}}`: the chapter's speaker notes, hidden until the
/// presenter shows them.
fn speaker_notes(slug: &str, to_root: &str, lab_data: &LabData) -> Result<String> {
    let path = lab_data.book_dir.join("notes").join(format!("{slug}.md"));
    let notes =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    // The notes' own directives (a fact's marker) are expanded too.
    let notes =
        expand(&notes, to_root, lab_data).with_context(|| format!("book/notes/{slug}.md"))?;
    // Hidden until the presenter toggle shows it (book/theme/presenter.js).
    Ok(format!(
        "\n<div class=\"speaker-notes\" data-notes=\"{slug}\">\n\n\
         **Speaker notes** (the presenter toggle, key `n`, shows and hides them)\n\n\
         {notes}\n\n</div>\n"
    ))
}

/// The comparison charts, or, in a book built from one machine's runs, how to
/// build them.
fn comparison_figures(to_root: &str, lab_data: &LabData) -> String {
    if lab_data.comparisons.is_empty() {
        return "\n<p class=\"compare-none\">This build of the book has one machine's runs, so \
                there is nothing to compare yet. Build it from everyone's folders: \
                <code>cargo xtask book --data alice --data bob --data carol</code>.</p>\n"
            .to_string();
    }
    let mut text = String::new();
    for figure in &lab_data.comparisons {
        let title = html_escape(&figure.title);
        let images = chart_images(to_root, &format!("{title}, one bar per machine"), |theme| {
            figure.svg_name(theme.name)
        });
        text.push_str(&format!(
            "\n<figure class=\"lab-chart compare-chart\" data-machines=\"{}\">\n{images}<figcaption>{title}. \
             Lab <code>{}</code>. {}</figcaption>\n</figure>\n",
            html_escape(&figure.machines.join(",")),
            figure.slug,
            html_escape(&figure.caption)
        ));
    }
    text
}

/// A chart's two renderings, light and dark (the CSS shows the one that
/// matches the theme); `file` names a rendering under charts/.
fn chart_images(to_root: &str, alt: &str, file: impl Fn(&charts::Theme) -> String) -> String {
    THEMES
        .iter()
        .map(|theme| {
            format!(
                "<img class=\"chart-{}\" src=\"{to_root}charts/{}\" alt=\"Chart: {alt}\" width=\"760\" height=\"430\">\n",
                theme.name,
                file(theme)
            )
        })
        .collect()
}

fn chart_figure(target: &str, to_root: &str, lab_data: &LabData) -> Result<String> {
    let (slug, name) = target.split_once('/').context("expected <slug>/<name>")?;
    let run = lab_data.run(slug)?;
    let spec = lab_data.specs[slug]
        .iter()
        .find(|spec| spec.name == name)
        .with_context(|| format!("labs/{slug}/charts.toml has no chart {name:?}"))?;
    let title = html_escape(&spec.title);
    let images = chart_images(to_root, &title, |theme| charts::svg_name(slug, name, theme));
    Ok(format!(
        "\n<figure class=\"lab-chart\">\n{images}<figcaption>{title}. Lab <code>{slug}</code>, {}. \
         <a href=\"{to_root}lab-data/{slug}.jsonl\">Data</a>.</figcaption>\n</figure>\n",
        html_escape(&run.caption_for(spec.clock))
    ))
}

#[cfg(test)]
mod tests {
    use std::{collections::HashMap, path::PathBuf};

    use super::*;
    use crate::data::RunData;

    const RUN: &str = concat!(
        r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","time_scale":1.0,"params":{},"machine":{"cpu":"Test CPU","cores":2,"os":"linux","kernel":"6.1","rustc":"rustc 1","crates":{}}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"a/b","values":{"n":77,"ms":3.70333,"why":"x<y"}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"twice","values":{"n":1}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"twice","values":{"n":2}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"part/a","values":{"n":3,"time_scale":2.0}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"part/b","values":{"n":4,"time_scale":2.0}}}"#,
        "\n",
        r#"{"type":"summary","data":{"series":"part/c","values":{"n":5,"time_scale":3.0}}}"#,
        "\n",
    );

    fn lab_data() -> LabData {
        LabData {
            data_dir: PathBuf::from("book/data"),
            book_dir: PathBuf::from("book"),
            specs: HashMap::from([("demo".to_string(), Vec::new())]),
            runs: HashMap::from([("demo".to_string(), RunData::parse(RUN).unwrap())]),
            full_runs: HashMap::new(),
            widgets: Vec::new(),
            comparisons: Vec::new(),
            enforce_claims: true,
            contradicted: Default::default(),
            facts: Vec::new(),
            fact_versions: Vec::new(),
        }
    }

    #[test]
    fn a_claim_renders_its_numbers_and_fails_the_reference_build_when_false() {
        let holds = "{{#claim demo a/b:n > 2x twice:n | {left} is more than twice {right}}}";
        let mut data = lab_data();
        // `twice` has two records: a claim, like a value, names one.
        let error = format!("{:#}", expand(holds, "", &data).unwrap_err());
        assert!(error.contains("more than one summary record"), "{error}");
        let holds = "{{#claim demo a/b:n > 70 | {left} connections, over seventy}}";
        let out = expand(holds, "", &data).unwrap();
        assert!(
            out.contains(">77</span> connections, over seventy"),
            "{out}"
        );
        assert!(
            out.contains("checked against the run: a/b:n (77) > 70 (70)"),
            "{out}"
        );
        let false_claim = "{{#claim demo a/b:n < a/b:ms | {left} fewer than {right}}}";
        let error = format!("{:#}", expand(false_claim, "", &data).unwrap_err());
        assert!(
            error.contains("line 1: ") && error.contains("does not hold on the run"),
            "{error}"
        );
        assert!(error.contains("a/b:n (77) < a/b:ms (3.70)"), "{error}");
        // A reader's run: the sentence stays, marked, and the build goes on.
        data.enforce_claims = false;
        let out = expand(false_claim, "", &data).unwrap();
        assert!(out.contains("this sentence does not hold for it"), "{out}");
        assert!(out.contains("(your run: <span"), "{out}");
        assert_eq!(data.contradicted.borrow().len(), 1);
        assert_eq!(data.contradicted.borrow()[0].0, "demo");
    }

    #[test]
    fn a_value_is_the_number_of_the_run_and_names_its_source() {
        let text = "opened {{#value demo a/b n}} connections in {{#value demo a/b ms}} ms";
        let out = expand(text, "", &lab_data()).unwrap();
        assert!(out.contains(">77</span> connections"), "{out}");
        assert!(out.contains(">3.70</span> ms"), "{out}");
        assert!(
            out.contains("title=\"book/data/demo.jsonl: a/b / n\""),
            "{out}"
        );
        let escaped = expand("{{#value demo a/b why}}", "", &lab_data()).unwrap();
        assert!(escaped.contains(">x&lt;y</span>"), "{escaped}");
        let literal = expand("\\{{#value demo a/b n}}", "", &lab_data()).unwrap();
        assert_eq!(literal, "{{#value demo a/b n}}");
    }

    #[test]
    fn a_full_run_is_read_as_slug_at_full_and_links_its_own_file() {
        let mut data = lab_data();
        let missing = format!(
            "{:#}",
            expand("{{#value demo@full a/b n}}", "", &data).unwrap_err()
        );
        assert!(
            missing.contains("no full run of lab \"demo\" in book/data/full")
                && missing.contains("cargo xtask lab demo --full --out book/data/full"),
            "{missing}"
        );
        let full = RUN.replace("\"n\":77", "\"n\":78");
        data.full_runs
            .insert("demo".into(), RunData::parse(&full).unwrap());
        let value = expand("{{#value demo@full a/b n}}", "", &data).unwrap();
        assert!(value.contains(">78</span>"), "{value}");
        assert!(
            value.contains("title=\"book/data/full/demo.jsonl: a/b / n\""),
            "{value}"
        );
        let table = expand("{{#table demo@full summary n a/b}}", "../", &data).unwrap();
        assert!(table.contains("| a/b | 78 |"), "{table}");
        assert!(table.contains("Lab <code>demo</code>"), "{table}");
        assert!(
            table.contains("href=\"../lab-data/full/demo.jsonl\""),
            "{table}"
        );
        // The quick run is still the one `demo` names.
        let quick = expand("{{#value demo a/b n}}", "", &data).unwrap();
        assert!(quick.contains(">77</span>"), "{quick}");
        let unknown = format!(
            "{:#}",
            expand("{{#value nolab@full a/b n}}", "", &data).unwrap_err()
        );
        assert!(unknown.contains("no lab named \"nolab\""), "{unknown}");
    }

    #[test]
    fn a_simulation_table_says_so_in_its_caption() {
        let measured = expand("{{#table demo summary n a/b}}", "", &lab_data()).unwrap();
        assert!(measured.contains("real time"), "{measured}");
        let simulated = expand(
            "{{#table demo summary n a/b clock=simulated}}",
            "",
            &lab_data(),
        )
        .unwrap();
        assert!(
            simulated.contains("simulation (seeded, simulated time)"),
            "{simulated}"
        );
        assert!(!simulated.contains("Test CPU"), "{simulated}");
        let wrong =
            expand("{{#table demo summary n a/b clock=fast}}", "", &lab_data()).unwrap_err();
        assert!(
            format!("{wrong:#}").contains(
                "expected clock=measured, clock=real-time, clock=simulated or clock=rows"
            ),
            "{wrong:#}"
        );
    }

    #[test]
    fn a_table_on_its_own_clock_names_its_rows_compression() {
        let own = expand(
            "{{#table demo summary n part/a,part/b clock=rows}}",
            "",
            &lab_data(),
        )
        .unwrap();
        assert!(own.contains("time compressed 2x"), "{own}");
        let mixed = expand(
            "{{#table demo summary n part/a,part/c clock=rows}}",
            "",
            &lab_data(),
        )
        .unwrap_err();
        assert!(
            format!("{mixed:#}").contains("the rows ran at different time scales"),
            "{mixed:#}"
        );
        let none = expand("{{#table demo summary n a/b clock=rows}}", "", &lab_data()).unwrap_err();
        assert!(
            format!("{none:#}").contains("series \"a/b\" has no numeric time_scale"),
            "{none:#}"
        );
    }

    #[test]
    fn other_directives_are_left_for_mdbook_and_errors_name_their_line() {
        let text = "{{#include a.rs}} and \\{{#include b.rs:2:3}}";
        assert_eq!(expand(text, "", &lab_data()).unwrap(), text);
        let error = expand("one\n{{#value demo a/b missing}}", "", &lab_data()).unwrap_err();
        assert!(format!("{error:#}").starts_with("line 2: {{#value demo a/b missing}}: "));
        let error = expand("one\n\n{{#value demo a/b n", "", &lab_data()).unwrap_err();
        assert_eq!(
            format!("{error:#}"),
            "line 3: {{#value is not closed with }}"
        );
    }

    #[test]
    fn a_value_that_is_not_one_field_of_one_record_is_an_error() {
        for (text, expected) in [
            (
                "{{#value demo nobody n}}",
                "no summary record for series \"nobody\"",
            ),
            ("{{#value demo a/b missing}}", "has no field \"missing\""),
            ("{{#value demo twice n}}", "more than one summary record"),
            ("{{#value demo a/b}}", "usage: {{#value"),
            ("{{#value other a/b n}}", "no lab named \"other\""),
        ] {
            let message = format!("{:#}", expand(text, "", &lab_data()).unwrap_err());
            assert!(message.contains(expected), "{text}: {message}");
            assert!(message.starts_with("line 1: "), "{text}: {message}");
        }
    }
}
