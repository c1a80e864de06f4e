//! The `main` every lab shares: parse `--quick` / `--full`, run the lab on a
//! multi-thread runtime under a hard time budget, print errors once, exit 2
//! (through [`crate::exit`], the one error path).

#[cfg(feature = "runtime")]
use std::{future::Future, process::ExitCode, time::Duration};

use anyhow::Result;
#[cfg(feature = "runtime")]
use anyhow::{Context, bail};

pub use crate::settings::Settings;

use crate::{flags::Opt, mode::Mode};

#[cfg(feature = "runtime")]
use crate::{
    exit,
    lab::{self, Lab},
    output::Output,
};

pub use crate::manifest::LabInfo;

/// The `main` of a lab: a [`lab::Subcommand`] when the first word names one;
/// otherwise parses the command line, builds the lab's settings for the mode
/// ([`Lab::for_mode`]) with the `--set` changes applied, and runs the lab
/// with them on stdout, its meta record first ([`lab::run`]); `--settings`
/// prints the settings instead. Every failure, a bad setting or a blown
/// budget included, becomes one line on stderr and exit code 2.
#[cfg(feature = "runtime")]
pub fn run_lab<L: Lab>() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(subcommand) = lab::subcommand::<L>(&args) {
        return (subcommand.main)(&args[1..]);
    }
    match LabInfo::from_manifest(L::MANIFEST) {
        Ok(info) => exit::exit_code(
            &format!("lab-{}", info.slug),
            parse_and_run::<L>(&info, &args),
        ),
        Err(error) => exit::exit_code("lab", Err(error)),
    }
}

/// The `main` of a lab's subcommand or child process (a check of the
/// reader's own server, a prober): runs `work` on a current-thread runtime;
/// success is exit 0, and a failure `error: <program>: <chain>` on one line
/// of stderr and exit 2. `work` bounds its own time.
#[cfg(feature = "runtime")]
pub fn run_subcommand(program: &str, work: impl Future<Output = Result<()>>) -> ExitCode {
    exit::exit_code(
        program,
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")
            .and_then(|runtime| runtime.block_on(work)),
    )
}

#[cfg(feature = "runtime")]
fn parse_and_run<L: Lab>(info: &LabInfo, args: &[String]) -> Result<()> {
    let Some(command) = parse_command_line(args)? else {
        println!("{}", usage::<L>(info));
        return Ok(());
    };
    let LabCommandLine {
        mode,
        settings: changes,
        name,
        print_settings,
    } = command;
    let config = changes.apply(L::for_mode(mode))?;
    if print_settings {
        for line in crate::settings::lines(&config)? {
            println!("{line}");
        }
        return Ok(());
    }
    let budget = info.budget(mode);
    // In a batch of labs (`cargo xtask book`), wait until none runs alone.
    crate::batch::join_from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let outcome = runtime.block_on(async {
        let mut out = Output::stdout().with_settings(&changes).with_name(name);
        let run = lab::run(&info.slug, mode, &config, &mut out);
        within_budget(budget, crate::batch::waited, run)
            .await
            .unwrap_or_else(|| bail!("did not finish within its {budget:?} budget ({mode} mode)"))
    });
    // Tasks a failed lab left behind (a stuck server, a hung client) must not
    // keep the process alive: give them a moment, then drop them.
    runtime.shutdown_timeout(Duration::from_millis(500));
    outcome
}

/// A lab's `--help`: what it is, its flags, and the subcommands people type.
#[cfg(feature = "runtime")]
fn usage<L: Lab>(info: &LabInfo) -> String {
    let slug = &info.slug;
    let mut text = format!(
        "lab-{slug}: {}\n\nUsage: lab-{slug} [options]\n\n\
         Prints JSON Lines records to stdout and progress to stderr; a run\n\
         takes at most {:?} (quick) or {:?} (full).\n\n{}",
        info.about,
        info.quick_budget,
        info.full_budget,
        crate::flags::help(&LAB_FLAGS, 0)
    );
    let listed: Vec<Opt> = L::SUBCOMMANDS
        .iter()
        .filter(|subcommand| subcommand.listed())
        .map(|subcommand| Opt::switch(subcommand.name, subcommand.about))
        .collect();
    if !listed.is_empty() {
        text.push_str(&format!(
            "\nSubcommands (lab-{slug} <subcommand> ...):\n{}",
            crate::flags::help(&listed, 2)
        ));
    }
    text.trim_end().to_string()
}

/// Runs `work` until it ends, or `None` once it has worked `budget`: the time
/// it spent waiting for the rest of its batch (`waited`, `batch::waited` in
/// a lab) does not count.
#[cfg(feature = "runtime")]
async fn within_budget<T>(
    budget: Duration,
    waited: impl Fn() -> Duration,
    work: impl Future<Output = T>,
) -> Option<T> {
    let started = tokio::time::Instant::now();
    let mut work = std::pin::pin!(work);
    loop {
        let deadline = started + budget + waited();
        match tokio::time::timeout_at(deadline, &mut work).await {
            Ok(output) => return Some(output),
            // Past the deadline with no more waiting to add: out of budget.
            Err(_) if started + budget + waited() <= deadline => return None,
            Err(_) => {}
        }
    }
}

/// A machine's name: a short label for a chart's legend, nothing that would
/// need escaping.
fn machine_name(text: &str) -> Result<String> {
    let good = !text.is_empty()
        && text.len() <= 24
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    anyhow::ensure!(
        good,
        "--name {text:?}: give 1 to 24 letters, digits, '-', '_' or '.'"
    );
    Ok(text.to_string())
}

/// The flags of a lab's `main`: what [`parse_command_line`] accepts and
/// what `--help` lists.
#[rustfmt::skip]
pub const LAB_FLAGS: [Opt; 5] = [
    Opt::switch("--quick", "seconds; the default"),
    Opt::switch("--full", "closer to production scales"),
    Opt::value("--set", "KEY=VALUE", "change one setting for this run (a list is \
        comma-separated); the meta record and every caption say what was set; may repeat"),
    Opt::value("--name", "NAME", "name this machine in the meta record (a workshop's comparison \
        charts label its runs with it)"),
    Opt::switch("--settings", "print the settings of the mode (after any --set) as KEY=VALUE \
        lines, and run nothing"),
];

/// What a lab's command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LabCommandLine {
    pub mode: Mode,
    pub settings: Settings,
    /// `--name`: what the meta record calls this machine.
    pub name: Option<String>,
    /// `--settings`: print the settings, run nothing.
    pub print_settings: bool,
}

/// The mode a lab's command line asks for (quick unless `--full`), its
/// `--set` settings and `--settings`, or `None` for `--help`.
pub fn parse_command_line(args: &[String]) -> Result<Option<LabCommandLine>> {
    if crate::flags::asks_for_help(args) {
        return Ok(None);
    }
    let mut command = LabCommandLine {
        mode: Mode::Quick,
        settings: Settings::default(),
        name: None,
        print_settings: false,
    };
    let mut flags = crate::flags::Flags::new(args).declared(&LAB_FLAGS);
    while let Some(flag) = flags.next_flag()? {
        match flag.name {
            "--quick" => command.mode = Mode::Quick,
            "--full" => command.mode = Mode::Full,
            "--settings" => command.print_settings = true,
            "--set" => command.settings.push(flag.value)?,
            "--name" => command.name = Some(machine_name(flag.value)?),
            _ => return Err(flag.unknown()),
        }
    }
    Ok(Some(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_command_line_names_a_mode_and_settings_or_asks_for_help() {
        let parse = |words: &[&str]| parse_command_line(&crate::flags::to_args(words));
        let mode = |words: &[&str]| parse(words).unwrap().map(|command| command.mode);
        assert_eq!(mode(&[]), Some(Mode::Quick));
        assert_eq!(mode(&["--full"]), Some(Mode::Full));
        assert_eq!(mode(&["--full", "--quick"]), Some(Mode::Quick));
        assert_eq!(mode(&["--help"]), None);
        assert_eq!(mode(&["--set", "x=1", "--help"]), None);
        let command = parse(&[
            "--set",
            "requests=5",
            "--full",
            "--set",
            "sweep=1,2",
            "--settings",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(command.settings.words(), ["requests=5", "sweep=1,2"]);
        assert!(command.print_settings);
        let error = |words: &[&str]| parse(words).unwrap_err().to_string();
        assert_eq!(error(&["--slow"]), "unknown flag \"--slow\"");
        assert_eq!(error(&["--set"]), "--set needs a value");
        assert!(error(&["--set", "requests"]).contains("expected key=value"));
        let named = parse(&["--name", "alice-laptop"]).unwrap().unwrap();
        assert_eq!(named.name.as_deref(), Some("alice-laptop"));
        assert!(error(&["--name", "a b"]).contains("give 1 to 24 letters"));
        assert!(error(&["--name", ""]).contains("give 1 to 24 letters"));
    }

    #[cfg(feature = "runtime")]
    #[tokio::test]
    async fn the_budget_leaves_out_the_time_spent_waiting_for_the_batch() {
        let budget = Duration::from_millis(100);
        let none = || Duration::ZERO;
        let nap = |ms| tokio::time::sleep(Duration::from_millis(ms));
        assert_eq!(within_budget(budget, none, async { 7 }).await, Some(7));
        assert_eq!(within_budget(budget, none, nap(300)).await, None);
        // A lab that waited 400 ms for the rest of its batch may take that
        // much longer, and no more.
        let waited = || Duration::from_millis(400);
        assert_eq!(within_budget(budget, waited, nap(300)).await, Some(()));
        let started = std::time::Instant::now();
        assert_eq!(within_budget(budget, waited, nap(5_000)).await, None);
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}
