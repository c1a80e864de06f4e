//! The report: a table for people, one JSON object for machines, and the
//! exit code (0 clean, 1 findings, 2 could not probe).

use lab_kit::exit::Exit;
use serde::Serialize;

use crate::{
    checks::Examined,
    expect::Judged,
    finding::{Finding, Grade},
    options::{Options, Target},
};

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub target: String,
    /// What the checks spoke: "plain TCP", or the TLS session.
    pub transport: String,
    pub balancer_idle_s: f64,
    pub window_s: f64,
    pub findings: Vec<Finding>,
    /// With `--expect FILE`: the rules of FILE the findings broke.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expect: Option<Judged>,
    /// 0 every check passed or was skipped, 1 a check warned or failed;
    /// with `--expect`, 0 every rule held, 1 one was broken.
    pub exit: u8,
}

impl Report {
    pub fn new(options: &Options, ran: Examined) -> Report {
        let Examined {
            findings,
            transport,
        } = ran;
        let expect = options
            .expect
            .as_ref()
            .map(|expectations| expectations.judge(&findings));
        let found = match &expect {
            Some(judged) => !judged.broken.is_empty(),
            None => findings
                .iter()
                .any(|finding| matches!(finding.grade, Grade::Warn | Grade::Fail)),
        };
        let exit = if found { Exit::Failed } else { Exit::Success }.code();
        Report {
            target: describe(&options.target),
            transport,
            balancer_idle_s: options.balancer_idle.as_secs_f64(),
            window_s: options.window.as_secs_f64(),
            findings,
            expect,
            exit,
        }
    }

    pub fn count(&self, grade: Grade) -> usize {
        self.findings
            .iter()
            .filter(|finding| finding.grade == grade)
            .count()
    }

    /// The table, then each finding's why and where to read about it.
    pub fn text(&self) -> String {
        let width = |cell: fn(&Finding) -> usize, title: &str| {
            self.findings
                .iter()
                .map(cell)
                .max()
                .unwrap_or(0)
                .max(title.len())
        };
        let check_width = width(|finding| finding.check.len(), "check");
        let mut text = format!(
            "doctor: {} over {} (balancer idle {} s, window {} s)\n\n{:check_width$}  {:5}  \
             measured\n",
            self.target, self.transport, self.balancer_idle_s, self.window_s, "check", "grade"
        );
        for finding in &self.findings {
            let line = format!(
                "{:check_width$}  {:5}  {}",
                finding.check,
                finding.grade.label(),
                finding.measured
            );
            text.push_str(&line);
            text.push('\n');
        }
        text.push('\n');
        for finding in &self.findings {
            text.push_str(&format!(
                "{} {}: {}\n    read: {}\n",
                finding.grade.label(),
                finding.check,
                finding.why,
                finding.read
            ));
        }
        text.push_str(&format!(
            "\n{} passed, {} warned, {} failed, {} skipped\n",
            self.count(Grade::Pass),
            self.count(Grade::Warn),
            self.count(Grade::Fail),
            self.count(Grade::Skip)
        ));
        if let Some(judged) = &self.expect {
            if judged.broken.is_empty() {
                text.push_str(&format!("expect {}: every rule held\n", judged.file));
            } else {
                text.push_str(&format!(
                    "expect {}: {} broken\n",
                    judged.file,
                    match judged.broken.len() {
                        1 => "1 rule".to_string(),
                        many => format!("{many} rules"),
                    }
                ));
                for broken in &judged.broken {
                    text.push_str(&format!("  {broken}\n"));
                }
            }
        }
        text
    }
}

pub fn describe(target: &Target) -> String {
    match target {
        Target::Listening(target) => target.clone(),
        Target::Command { port, command } => format!("127.0.0.1:{port} ({})", command.join(" ")),
    }
}
