//! The one command-line parser of the workspace: `--flag value` pairs for the
//! hidden subcommands of a lab binary (a prober, a server child) and its small
//! tools, the switches a lab's `main` takes (`--quick`, `--full`, `--help`),
//! an exercise's check (`--solution`) and the xtask's tasks; one-line errors.
//! A command that declares its flags as a table of [`Opt`]s gets both its
//! parse and its `--help` lines from that one table ([`help`]).
//!
//! A lab that runs a child process usually re-executes its own binary with a
//! hidden subcommand and passes the child's settings as flags. Those command
//! lines are written by the lab, not typed by people, so the grammar is the
//! smallest that reads well in `ps`: every flag takes exactly one value, in
//! `--name value` form. A clap-sized parser would add a dependency and a
//! build step to every lab for that.
//!
//! ```
//! # use lab_kit::flags::Flags;
//! # fn main() -> anyhow::Result<()> {
//! let args: Vec<String> = ["--port", "8080", "--db", "/tmp/x.db"].map(String::from).to_vec();
//! let (mut port, mut db) = (0u16, String::new());
//! let mut flags = Flags::new(&args).for_what("server");
//! while let Some(flag) = flags.next_flag()? {
//!     match flag.name {
//!         "--port" => port = flag.parse("a port")?,
//!         "--db" => db = flag.value.to_string(),
//!         _ => return Err(flag.unknown()),
//!     }
//! }
//! assert_eq!((port, db.as_str()), (8080, "/tmp/x.db"));
//! # Ok(())
//! # }
//! ```

use std::{slice, str::FromStr, time::Duration};

use anyhow::{Context, Result, anyhow};

/// The flags of one command line, read a pair at a time.
pub struct Flags<'a> {
    rest: slice::Iter<'a, String>,
    what: &'a str,
    declared: Option<&'a [Opt]>,
}

/// One word of a command line that takes words besides its flags (the
/// xtask's `lab conn-reuse --full`): a flag, or a word of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    Flag(Flag<'a>),
    Word(&'a str),
}

/// One flag a command declares: its name, the placeholder of its value
/// (`None` for a switch), and one line of help. A command's table of these
/// is what its parser accepts ([`Flags::declared`]) and what its `--help`
/// lists ([`help`]), so the two cannot disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt {
    pub name: &'static str,
    pub value: Option<&'static str>,
    pub help: &'static str,
}

impl Opt {
    /// A flag without a value: `--full`.
    pub const fn switch(name: &'static str, help: &'static str) -> Opt {
        Opt {
            name,
            value: None,
            help,
        }
    }

    /// A flag with one: `--out DIR`.
    pub const fn value(name: &'static str, value: &'static str, help: &'static str) -> Opt {
        Opt {
            name,
            value: Some(value),
            help,
        }
    }

    /// `--out DIR`, or `--full`: how the flag is written.
    pub fn synopsis(&self) -> String {
        match self.value {
            Some(value) => format!("{} {value}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// The `--help` lines of a table of flags: each flag's synopsis after
/// `indent` spaces, its help beside it in one column, wrapped to 80
/// characters.
pub fn help(opts: &[Opt], indent: usize) -> String {
    let width = opts
        .iter()
        .map(|opt| opt.synopsis().len())
        .max()
        .unwrap_or(0);
    let column = indent + width + 2;
    let mut text = String::new();
    for opt in opts {
        let mut line = format!("{:indent$}{:width$}  ", "", opt.synopsis());
        for word in opt.help.split_whitespace() {
            if line.len() > column && line.len() + 1 + word.len() > 80 {
                text.push_str(line.trim_end());
                text.push('\n');
                line = " ".repeat(column);
            } else if line.len() > column {
                line.push(' ');
            }
            line.push_str(word);
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// One `--name value` pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag<'a> {
    pub name: &'a str,
    pub value: &'a str,
    what: &'a str,
}

/// A command line asks for help: `-h` or `--help` anywhere before a `--`
/// (after it, words belong to a command the subcommand runs).
pub fn asks_for_help(args: &[String]) -> bool {
    args.iter()
        .take_while(|arg| *arg != "--")
        .any(|arg| arg == "-h" || arg == "--help")
}

/// Owned arguments from string literals, for the parsers' tests.
pub fn to_args(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

impl<'a> Flags<'a> {
    /// The flags in `args` (the arguments after the subcommand).
    pub fn new(args: &'a [String]) -> Flags<'a> {
        Flags {
            rest: args.iter(),
            what: "",
            declared: None,
        }
    }

    /// The flags a command declares: one not in the table is an unknown flag
    /// at once, before any value is read (`--bogus` alone is `unknown flag
    /// "--bogus"`, not `--bogus needs a value`); a switch comes back with an
    /// empty `value`; any other takes the word after it. Without a table
    /// (a lab's own children, whose command lines the lab writes), every flag
    /// takes a value and the caller names the unknown ones.
    pub fn declared(mut self, opts: &'a [Opt]) -> Flags<'a> {
        self.declared = Some(opts);
        self
    }

    /// Names whose flags these are in the "unknown flag" error:
    /// `for_what("prober")` gives `unknown prober flag "--bogus"`.
    pub fn for_what(mut self, what: &'a str) -> Flags<'a> {
        self.what = what;
        self
    }

    /// The next pair (or switch), `None` at the end, or an error when a flag
    /// has no value (`--db needs a value`) or a word is not a flag.
    pub fn next_flag(&mut self) -> Result<Option<Flag<'a>>> {
        match self.next_arg()? {
            Some(Arg::Word(word)) => Err(anyhow!(
                "unexpected argument {word:?} (flags start with --)"
            )),
            Some(Arg::Flag(flag)) => Ok(Some(flag)),
            None => Ok(None),
        }
    }

    /// The next flag or word, `None` at the end, or an error when a flag is
    /// unknown or has no value. A word is anything that does not start
    /// with `-`, or a flag's value.
    pub fn next_arg(&mut self) -> Result<Option<Arg<'a>>> {
        let Some(name) = self.rest.next() else {
            return Ok(None);
        };
        if !name.starts_with('-') {
            return Ok(Some(Arg::Word(name)));
        }
        let declared = self
            .declared
            .map(|opts| opts.iter().find(|opt| opt.name == name.as_str()));
        let is_switch = matches!(declared, Some(Some(opt)) if opt.value.is_none());
        if is_switch {
            return Ok(Some(Arg::Flag(Flag {
                name,
                value: "",
                what: self.what,
            })));
        }
        if matches!(declared, Some(None)) {
            return Err(Flag {
                name,
                value: "",
                what: self.what,
            }
            .unknown());
        }
        let value = self
            .rest
            .next()
            .with_context(|| format!("{name} needs a value"))?;
        Ok(Some(Arg::Flag(Flag {
            name,
            value,
            what: self.what,
        })))
    }
}

impl Flag<'_> {
    /// The value as a `T`, or `--port "x" is not a port: invalid digit found
    /// in string` (`what` = "a port"; the parser's reason follows the colon).
    pub fn parse<T>(&self, what: &str) -> Result<T>
    where
        T: FromStr,
        T::Err: std::error::Error + Send + Sync + 'static,
    {
        self.value
            .parse()
            .with_context(|| format!("{} {:?} is not {what}", self.name, self.value))
    }

    /// The value as whole milliseconds: `--slow-ms 800`.
    pub fn millis(&self) -> Result<Duration> {
        self.parse("whole milliseconds").map(Duration::from_millis)
    }

    /// The error for a flag the caller does not know.
    pub fn unknown(&self) -> anyhow::Error {
        if self.what.is_empty() {
            anyhow!("unknown flag {:?}", self.name)
        } else {
            anyhow!("unknown {} flag {:?}", self.what, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::to_args as strings;

    /// Runs a small parser with `--count N` and `--wait-ms N`.
    fn parse(args: &[&str]) -> Result<(u64, Duration)> {
        let args = strings(args);
        let (mut count, mut wait) = (0, Duration::ZERO);
        let mut flags = Flags::new(&args).for_what("test");
        while let Some(flag) = flags.next_flag()? {
            match flag.name {
                "--count" => count = flag.parse("a count")?,
                "--wait-ms" => wait = flag.millis()?,
                _ => return Err(flag.unknown()),
            }
        }
        Ok((count, wait))
    }

    fn error_of(args: &[&str]) -> String {
        let error = parse(args).expect_err("an error");
        let text = format!("{error:#}");
        assert!(!text.contains('\n'), "not one line: {text}");
        text
    }

    #[test]
    fn reads_pairs_in_any_order() {
        assert_eq!(parse(&[]).expect("empty"), (0, Duration::ZERO));
        assert_eq!(
            parse(&["--wait-ms", "250", "--count", "3"]).expect("valid"),
            (3, Duration::from_millis(250))
        );
        // The last of a repeated flag wins, as in most command lines.
        assert_eq!(
            parse(&["--count", "1", "--count", "2"]).expect("valid").0,
            2
        );
    }

    #[test]
    fn rejects_an_unknown_flag_in_one_line() {
        assert_eq!(
            error_of(&["--count", "1", "--bogus", "1"]),
            "unknown test flag \"--bogus\""
        );
        let args = strings(&["--bogus", "1"]);
        let flag = Flags::new(&args)
            .next_flag()
            .expect("a pair")
            .expect("one flag");
        assert_eq!(flag.unknown().to_string(), "unknown flag \"--bogus\"");
    }

    #[test]
    fn rejects_a_missing_value_in_one_line() {
        assert_eq!(error_of(&["--count"]), "--count needs a value");
        assert_eq!(
            error_of(&["--count", "1", "--wait-ms"]),
            "--wait-ms needs a value"
        );
    }

    #[test]
    fn switches_take_no_value_and_words_are_not_flags() {
        let args = strings(&["--full", "--count", "2", "-h"]);
        let opts = [
            Opt::switch("--full", ""),
            Opt::value("--count", "N", ""),
            Opt::switch("-h", ""),
        ];
        let mut flags = Flags::new(&args).declared(&opts);
        let mut seen = Vec::new();
        while let Some(flag) = flags.next_flag().expect("valid") {
            seen.push((flag.name, flag.value));
        }
        assert_eq!(seen, [("--full", ""), ("--count", "2"), ("-h", "")]);
        assert_eq!(
            error_of(&["full"]),
            "unexpected argument \"full\" (flags start with --)"
        );
    }

    #[test]
    fn a_known_list_names_an_unknown_flag_before_its_value() {
        let args = strings(&["--count", "1", "--bogus"]);
        let opts = [Opt::value("--count", "N", "")];
        let mut flags = Flags::new(&args).for_what("test").declared(&opts);
        assert_eq!(flags.next_flag().unwrap().unwrap().value, "1");
        let error = flags.next_flag().unwrap_err().to_string();
        assert_eq!(error, "unknown test flag \"--bogus\"");
    }

    #[test]
    fn a_declared_table_is_the_parse_and_the_help() {
        const OPTS: [Opt; 2] = [
            Opt::switch("--full", "closer to production"),
            Opt::value(
                "--out",
                "DIR",
                "write the runs into DIR instead of book/data",
            ),
        ];
        let args = strings(&["--full", "--out", "mine"]);
        let mut flags = Flags::new(&args).declared(&OPTS);
        let mut seen = Vec::new();
        while let Some(flag) = flags.next_flag().expect("valid") {
            seen.push((flag.name, flag.value));
        }
        assert_eq!(seen, [("--full", ""), ("--out", "mine")]);
        let args = strings(&["--bogus"]);
        let error = Flags::new(&args).declared(&OPTS).next_flag().unwrap_err();
        assert_eq!(error.to_string(), "unknown flag \"--bogus\"");
        assert_eq!(
            help(&OPTS, 2),
            "  --full     closer to production\n  --out DIR  write the runs into DIR instead of book/data\n"
        );
        // A help too long for 80 columns goes on under its own column.
        let long = [Opt::switch(
            "--x",
            "word word word word word word word word word word word word word word word word",
        )];
        let text = help(&long, 0);
        assert!(text.lines().all(|line| line.len() <= 80), "{text}");
        assert!(
            text.lines().nth(1).unwrap().starts_with("     word"),
            "{text}"
        );
    }

    #[test]
    fn help_is_asked_for_before_a_double_dash_only() {
        assert!(asks_for_help(&strings(&["--port", "1", "-h"])));
        assert!(asks_for_help(&strings(&["--help"])));
        assert!(!asks_for_help(&strings(&["--", "node", "--help"])));
        assert!(!asks_for_help(&strings(&["--port", "1"])));
    }

    #[test]
    fn rejects_a_bad_value_in_one_line() {
        assert_eq!(
            error_of(&["--count", "many"]),
            "--count \"many\" is not a count: invalid digit found in string"
        );
        assert_eq!(
            error_of(&["--wait-ms", "1.5"]),
            "--wait-ms \"1.5\" is not whole milliseconds: invalid digit found in string"
        );
    }
}
