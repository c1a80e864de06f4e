//! The command line's parse, task by task, and its one-line errors.

use super::*;
use lab_kit::exit::is_bad_input;

fn parse(line: &str) -> Result<Task> {
    let words: Vec<String> = line.split_whitespace().map(String::from).collect();
    Task::parse(&words)
}

fn error(line: &str) -> String {
    let error = parse(line).expect_err(line);
    assert!(is_bad_input(&error), "{line}: exit 2");
    format!("{error}")
}

#[test]
fn each_task_parses_into_its_own_command() {
    assert_eq!(parse("").unwrap(), Task::Help);
    assert_eq!(
        parse("lab conn-reuse blocking-lag --full --out target/mine").unwrap(),
        Task::Lab(LabCommand {
            labs: LabChoice::Named(vec!["conn-reuse".into(), "blocking-lag".into()]),
            mode: Mode::Full,
            out: Some(PathBuf::from("target/mine")),
            settings: lab_kit::Settings::default(),
            name: None,
        })
    );
    assert_eq!(
        parse("lab conn-reuse --set in_flight=5 --out mine --set requests=50").unwrap(),
        Task::Lab(LabCommand {
            labs: LabChoice::Named(vec!["conn-reuse".into()]),
            mode: Mode::Quick,
            out: Some(PathBuf::from("mine")),
            settings: ["in_flight=5", "requests=50"]
                .iter()
                .try_fold(lab_kit::Settings::default(), |mut settings, pair| settings
                    .push(pair)
                    .map(|()| settings),)
                .unwrap(),
            name: None,
        })
    );
    assert_eq!(
        parse("lab --all").unwrap(),
        Task::Lab(LabCommand {
            labs: LabChoice::All,
            mode: Mode::Quick,
            out: None,
            settings: lab_kit::Settings::default(),
            name: None,
        })
    );
    assert_eq!(
        parse("book --no-run").unwrap(),
        Task::Book(BookCommand {
            data: BookData::Reference,
            mode: Mode::Quick,
            rerun: Rerun::Changed,
        })
    );
    assert_eq!(
        parse("serve --data mine --port 8080").unwrap(),
        Task::Serve {
            book: BookCommand {
                data: BookData::Overlay(PathBuf::from("mine")),
                mode: Mode::Quick,
                rerun: Rerun::Changed,
            },
            port: 8080,
        }
    );
    assert_eq!(
        parse("book --rerun dns conn-reuse").unwrap(),
        Task::Book(BookCommand {
            data: BookData::FreshRuns,
            mode: Mode::Quick,
            rerun: Rerun::Named(vec!["dns".into(), "conn-reuse".into()]),
        })
    );
    assert!(matches!(
        parse("book --rerun").unwrap(),
        Task::Book(BookCommand {
            rerun: Rerun::All,
            ..
        })
    ));
    assert_eq!(parse("tidy").unwrap(), Task::Tidy);
}

#[test]
fn bad_usage_is_one_line_naming_what_is_wrong() {
    for (line, says) in [
        ("frobnicate", "unknown task \"frobnicate\""),
        ("book --fast", "unknown flag \"--fast\""),
        ("book --no-run --data mine", "give one"),
        ("book --no-run --rerun", "--rerun runs labs"),
        ("book dns", "unexpected argument \"dns\""),
        ("lab --all conn-reuse", "not both"),
        ("lab conn-reuse --set a=1", "needs --out"),
        ("lab conn-reuse --set a --out mine", "expected key=value"),
        ("lab --all --set a=1 --out mine", "exactly one lab"),
        ("lab conn-reuse --set", "--set needs a value"),
        ("lab conn-reuse --quick --full", "one of --quick and --full"),
        ("lab --out", "--out needs a value"),
        ("serve --port http", "not a port number"),
        ("test extra", "unexpected argument \"extra\""),
        ("exercise verify", "usage: cargo xtask exercise"),
        ("prepare --bundle", "--bundle needs a value"),
        ("lab --all --name alice", "--name needs --out"),
        ("prepare --fast", "unknown flag \"--fast\""),
        ("tidy --full", "unknown flag \"--full\""),
        (
            "exercise watch a --solution",
            "--solution goes with exercise verify",
        ),
    ] {
        assert!(error(line).contains(says), "{line}: {}", error(line));
    }
    for line in ["frobnicate", "book --fast", "lab --out"] {
        assert!(!error(line).contains('\n'), "{line}");
    }
}

/// The help comes from the table the parser reads: it names every task and
/// every flag, and fits 80 columns.
#[test]
fn the_help_lists_every_task_and_flag_of_the_table() {
    let text = help();
    for task in TASKS {
        assert!(
            text.contains(&format!("\n  {}", task.name)),
            "{}",
            task.name
        );
        for flag in task.flags {
            assert!(text.contains(&flag.synopsis()), "{}", flag.name);
        }
    }
    assert!(text.lines().all(|line| line.len() <= 80), "{text}");
}

/// Every `cargo xtask ...` command the README shows parses (the doctor reads
/// its own flags; a `<slug>` placeholder stands for a lab), so the README
/// cannot teach a command the xtask refuses.
#[test]
fn every_command_in_the_readme_parses() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let mut commands = Vec::new();
    for line in readme.lines() {
        if let Some(command) = line.strip_prefix("$ cargo xtask") {
            commands.push(command.split('#').next().unwrap_or_default().to_string());
        }
        for (index, piece) in line.split('`').enumerate() {
            if index % 2 == 1
                && let Some(command) = piece.strip_prefix("cargo xtask")
            {
                commands.push(command.to_string());
            }
        }
    }
    assert!(commands.len() >= 20, "{commands:?}");
    for command in commands {
        let command = command.replace("<slug>", "conn-reuse");
        if command.trim_start().starts_with("doctor") {
            continue;
        }
        if let Err(error) = parse(&command) {
            panic!("README: `cargo xtask{command}`: {error:#}");
        }
    }
}
