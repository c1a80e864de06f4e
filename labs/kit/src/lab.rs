//! What a lab is to the kit ([`Lab`]): the settings of a mode, the run, and
//! the other commands its binary answers ([`Subcommand`]); and the one place
//! a run's meta record is written ([`run`]), so no lab writes its own.
//! [`crate::cli::run_lab`] is the `main` that drives a lab; [`quick_run`] is
//! the same run for a lab's tests, in process.
//!
//! A lab's type is its `Config`, one in each lab crate (`lab_dns::Config`):
//!
//! ```
//! use lab_kit::{Lab, Mode, Output};
//! use serde::{Deserialize, Serialize};
//!
//! /// What one run measures.
//! #[derive(Serialize, Deserialize)]
//! pub struct Config {
//!     pub requests: usize,
//! }
//!
//! impl Lab for Config {
//!     const MANIFEST: &str = "[package]\nname = \"lab-demo\"\ndescription = \"a demo\"\n\
//!         [package.metadata.lab]\ntitle = \"Demo\"\nquick-budget = 5\nfull-budget = 50\n";
//!
//!     fn for_mode(mode: Mode) -> Config {
//!         Config { requests: mode.pick(20, 2_000) }
//!     }
//!
//!     async fn run(&self, out: &mut Output) -> anyhow::Result<()> {
//!         out.write_summary("demo", &serde_json::json!({ "requests": self.requests }))
//!     }
//! }
//!
//! // The lab's `main` is `lab_kit::cli::run_lab::<Config>()`.
//! assert_eq!(Config::for_mode(Mode::Quick).requests, 20);
//! ```

use std::{future::Future, process::ExitCode};

use anyhow::{Context, Result};
use serde::{Serialize, de::DeserializeOwned};

use crate::{manifest::LabInfo, mode::Mode, output::Output, record::Meta};

/// A lab, implemented by its `Config`: the settings one run measures with,
/// which `--set` changes (so they round-trip through serde) and the meta
/// record carries as its `params`.
pub trait Lab: Serialize + DeserializeOwned {
    /// The lab's `Cargo.toml`, `include_str!("../Cargo.toml")`: its slug
    /// (the package name, `lab-<slug>`), title and budgets ([`LabInfo`]).
    const MANIFEST: &'static str;

    /// The other commands the lab's binary answers, each chosen by the first
    /// word of its command line: a probe of the reader's own server, or a
    /// child process the lab starts from its own binary.
    const SUBCOMMANDS: &'static [Subcommand] = &[];

    /// The settings of a mode, each written once beside its name with its two
    /// values (`requests: mode.pick(200, 2_000)`).
    fn for_mode(mode: Mode) -> Self;

    /// How many times faster than production the lab's clock runs (the meta
    /// record's `time_scale`, which every caption states); 1 for none.
    fn time_scale(&self) -> f64 {
        1.0
    }

    /// Runs every part, writing its samples and summaries to `out`, after the
    /// meta record the kit wrote.
    fn run(&self, out: &mut Output) -> impl Future<Output = Result<()>>;
}

/// A command of a lab's binary besides the lab: `lab-<slug> <name> ...` runs
/// `main` with the words after the name, and exits with its code.
#[derive(Debug, Clone, Copy)]
pub struct Subcommand {
    /// The first word that chooses it. A name that starts with `__` is a
    /// child process the lab starts (its prober, its server): not typed by
    /// people, so the lab's `--help` leaves it out.
    pub name: &'static str,
    /// One line for the lab's `--help`.
    pub about: &'static str,
    /// Its `main`: given the words after its name; bounds its own time and
    /// prints its own error, through [`crate::exit`].
    pub main: fn(&[String]) -> ExitCode,
}

impl Subcommand {
    pub const fn new(
        name: &'static str,
        about: &'static str,
        main: fn(&[String]) -> ExitCode,
    ) -> Subcommand {
        Subcommand { name, about, main }
    }

    /// Whether the lab's `--help` lists it: a command for people, not a child.
    pub fn listed(&self) -> bool {
        !self.name.starts_with("__")
    }
}

/// The subcommand of `L` that a command line (the words after the program's
/// name) asks for, if any.
pub fn subcommand<L: Lab>(args: &[String]) -> Option<&'static Subcommand> {
    let first = args.first()?;
    L::SUBCOMMANDS
        .iter()
        .find(|subcommand| subcommand.name == first)
}

/// One run of a lab: its meta record first (the slug, the mode, the time
/// scale and `config`; what `--set` changed and `--name` from `out`), then
/// the lab's parts. The one place a run's meta record is written.
pub async fn run<L: Lab>(slug: &str, mode: Mode, config: &L, out: &mut Output) -> Result<()> {
    out.write_meta(Meta::describe(slug, mode, config.time_scale(), config)?)?;
    config.run(out).await
}

/// A quick run of a lab with `config`, in process, its records kept: for the
/// labs' tests. The meta record is the one the lab binary writes.
pub async fn quick_run<L: Lab>(config: &L) -> Result<Output> {
    let slug = LabInfo::from_manifest(L::MANIFEST)?.slug;
    let mut out = Output::collect();
    run(&slug, Mode::Quick, config, &mut out)
        .await
        .with_context(|| format!("the quick run of {slug}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Config {
        requests: usize,
    }

    fn probe_main(args: &[String]) -> ExitCode {
        ExitCode::from(args.len() as u8)
    }

    impl Lab for Config {
        const MANIFEST: &str = "[package]\nname = \"lab-demo\"\ndescription = \"a demo\"\n\
            [package.metadata.lab]\ntitle = \"Demo\"\nquick-budget = 5\nfull-budget = 50\n";
        const SUBCOMMANDS: &[Subcommand] = &[
            Subcommand::new("probe", "probe any server", probe_main),
            Subcommand::new("__child", "the lab's child", probe_main),
        ];

        fn for_mode(mode: Mode) -> Config {
            Config {
                requests: mode.pick(2, 20),
            }
        }

        fn time_scale(&self) -> f64 {
            50.0
        }

        async fn run(&self, out: &mut Output) -> Result<()> {
            out.write_summary("demo", &serde_json::json!({ "requests": self.requests }))
        }
    }

    #[cfg(feature = "runtime")]
    #[tokio::test]
    async fn the_kit_writes_the_meta_record_before_the_run() {
        let out = quick_run(&Config::for_mode(Mode::Quick)).await.unwrap();
        let meta = out.meta().expect("a meta record first");
        assert_eq!((meta.lab.as_str(), meta.mode), ("demo", Mode::Quick));
        assert_eq!(meta.time_scale, 50.0);
        assert_eq!(
            meta.params,
            crate::record::to_fields(&Config { requests: 2 }).unwrap()
        );
        assert_eq!(out.records().len(), 2);
        assert!(out.summary("demo").is_some());
    }

    #[test]
    fn a_subcommand_is_chosen_by_the_first_word() {
        let words = |words: &[&str]| crate::flags::to_args(words);
        let chosen = |words: &[String]| subcommand::<Config>(words).map(|found| found.name);
        assert_eq!(chosen(&words(&["probe", "--target", "x"])), Some("probe"));
        assert_eq!(chosen(&words(&["__child"])), Some("__child"));
        assert_eq!(chosen(&words(&["--full", "probe"])), None);
        assert_eq!(chosen(&[]), None);
        let listed: Vec<&str> = Config::SUBCOMMANDS
            .iter()
            .filter(|subcommand| subcommand.listed())
            .map(|subcommand| subcommand.name)
            .collect();
        assert_eq!(listed, ["probe"]);
    }
}
