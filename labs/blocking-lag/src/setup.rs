//! The server setups the lab compares: a runtime flavour, how many reports
//! arrive at once, and where the report's CPU work is done.

use lab_kit::Series;

use crate::{handlers::Offload, server::Flavour};

/// One server setup the lab measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerSetup {
    pub name: &'static str,
    pub flavour: Flavour,
    /// Reports requested at the same moment.
    pub reports: usize,
    pub offload: Offload,
    /// Rounds of `reports`, one after another: more than one where the
    /// outcome is a race worth counting (see `Config::race_rounds`).
    pub repeat_for_race: bool,
}

const TWO_WORKERS: Flavour = Flavour::MultiThread { workers: 2 };

impl HandlerSetup {
    /// Every setup, in the order the chapter discusses them. The fixes run
    /// in the hardest case the multi-thread runtime met: two reports at once
    /// on two workers.
    pub const ALL: [HandlerSetup; 7] = [
        HandlerSetup::new("current-thread", Flavour::CurrentThread, 1, Offload::Inline),
        HandlerSetup::new("two-workers", TWO_WORKERS, 1, Offload::Inline).repeated(),
        HandlerSetup::new("two-reports", TWO_WORKERS, 2, Offload::Inline),
        HandlerSetup::new("spawn-blocking", TWO_WORKERS, 2, Offload::SpawnBlocking),
        HandlerSetup::new("rayon", TWO_WORKERS, 2, Offload::Rayon),
        HandlerSetup::new("background-job", TWO_WORKERS, 2, Offload::BackgroundJob),
        HandlerSetup::new("chunked", TWO_WORKERS, 2, Offload::Chunked),
    ];

    pub const fn new(
        name: &'static str,
        flavour: Flavour,
        reports: usize,
        offload: Offload,
    ) -> HandlerSetup {
        HandlerSetup {
            name,
            flavour,
            reports,
            offload,
            repeat_for_race: false,
        }
    }

    /// The same setup, run for `Config::race_rounds` rounds.
    pub const fn repeated(mut self) -> HandlerSetup {
        self.repeat_for_race = true;
        self
    }

    /// A setup by name.
    pub fn named(name: &str) -> Option<HandlerSetup> {
        HandlerSetup::ALL
            .into_iter()
            .find(|setup| setup.name == name)
    }

    pub(crate) fn runtime_label(&self) -> String {
        match self.flavour {
            Flavour::CurrentThread => "current_thread".into(),
            Flavour::MultiThread { workers } => format!("multi_thread({workers})"),
        }
    }

    pub(crate) fn offload_label(&self) -> &'static str {
        match self.offload {
            Offload::Inline => "inline",
            Offload::SpawnBlocking => "spawn_blocking",
            Offload::Rayon => "rayon",
            Offload::BackgroundJob => "background job",
            Offload::Chunked => "chunked",
        }
    }
}

impl Series for HandlerSetup {
    fn series(&self) -> String {
        self.name.to_string()
    }
}
