//! The library's own tests, moved here from `#[cfg(test)]` modules: a library's unit
//! tests are a second build of the whole library at opt-level 3 (6 s of a cold
//! `cargo xtask test` here); in this binary they reuse the one `cargo xtask book` built.

/// `checks/turn.rs`
mod turn {
    use std::time::Duration;

    use lab_doctor::checks::Turn;

    #[tokio::test]
    async fn each_turn_waits_for_the_one_before() {
        let mut turns = Turn::in_order(3);
        let mut third = turns.pop().expect("three");
        let mut second = turns.pop().expect("two");
        let mut first = turns.pop().expect("one");
        first.take().await;
        let waiting = tokio::time::timeout(Duration::from_millis(50), second.take()).await;
        assert!(
            waiting.is_err(),
            "the second took its turn before the first handed on"
        );
        first.hand_on(None).await;
        tokio::time::timeout(Duration::from_secs(5), second.take())
            .await
            .expect("the second takes its turn once the first hands on");
        // Dropped without handing on: the third goes on all the same.
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), third.take())
            .await
            .expect("a dropped turn hands on");
        Turn::alone().take().await;
        assert_eq!(
            Turn::alone().hand_on(None).await,
            None,
            "no one to hand on to"
        );
    }

    #[tokio::test]
    async fn hands_on_once_the_server_is_quiet() {
        let mut turns = Turn::in_order(2);
        let mut second = turns.pop().expect("two");
        let mut first = turns.pop().expect("one");
        // A process that spins until it is stopped (SIGSTOP) 400 ms later:
        // then it exists and uses no CPU.
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh starts");
        let pid = busy.id() as i32;
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            lab_kit::process::signal(pid, libc::SIGSTOP).expect("stopped");
        });
        let waited = first.hand_on(Some(pid)).await.expect("handed on");
        stopper.await.expect("the stopper ran");
        let _ = busy.kill();
        let _ = busy.wait();
        tokio::time::timeout(Duration::from_secs(1), second.take())
            .await
            .expect("handed on");
        assert!(
            waited >= Duration::from_millis(400),
            "handed on after {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(2),
            "a stopped process is quiet: {waited:?}"
        );
    }
}

/// `checks/load.rs`
mod load {
    use lab_doctor::checks::load::*;

    #[test]
    fn reads_both_forms_of_retry_after() {
        assert_eq!(retry_after_seconds(" 3 "), Some(3.0));
        assert_eq!(
            retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(0.0)
        );
        assert_eq!(retry_after_seconds("soon"), None);
        assert_eq!(retry_after_seconds("-1"), None);
    }
}

/// `options.rs`
mod options {
    use std::time::Duration;

    use lab_doctor::{Check, options::*, tls::Trust};

    use lab_kit::flags::to_args as strings;

    #[test]
    fn reads_a_target_checks_and_flags() {
        let options = parse(&strings(&[
            "127.0.0.1:3000",
            "slow-head",
            "--window",
            "3s",
            "idle-keepalive",
            "--json",
        ]))
        .unwrap();
        assert_eq!(options.target, Target::Listening("127.0.0.1:3000".into()));
        assert_eq!(options.checks, [Check::IdleKeepAlive, Check::SlowHead]);
        assert_eq!(options.window, Duration::from_secs(3));
        assert!(options.json);
        // By default the HTTP/1.1 checks; the HTTP/2 ones too over TLS or
        // with --h2c.
        let all = parse(&strings(&["localhost:1"])).unwrap();
        assert_eq!(all.checks, Check::HTTP1);
        let both = [&Check::HTTP1[..], &Check::HTTP2[..]].concat();
        assert_eq!(
            parse(&strings(&["localhost:1", "--h2c"])).unwrap().checks,
            both
        );
        assert_eq!(
            parse(&strings(&["https://localhost:1"])).unwrap().checks,
            both
        );
        assert_eq!(Check::ALL.to_vec(), both);
    }

    #[test]
    fn reads_a_command() {
        let options = parse(&strings(&[
            "--port", "8080", "shutdown", "--", "node", "s.js",
        ]))
        .unwrap();
        assert_eq!(
            options.target,
            Target::Command {
                port: 8080,
                command: strings(&["node", "s.js"])
            }
        );
        assert_eq!(options.checks, [Check::Shutdown]);
        assert_eq!(options.tls, None);
    }

    #[test]
    fn reads_tls_from_the_scheme_or_the_flag_and_trust_from_its_flags() {
        let options = parse(&strings(&["https://localhost:8443/"])).unwrap();
        assert_eq!(options.target, Target::Listening("localhost:8443".into()));
        assert_eq!(options.tls, Some(Trust::System));
        let options = parse(&strings(&["https://[::1]:8443", "--insecure"])).unwrap();
        assert_eq!(options.tls, Some(Trust::Insecure));
        let options = parse(&strings(&[
            "--tls", "--ca", "ca.pem", "--port", "8443", "--", "server",
        ]))
        .unwrap();
        assert_eq!(options.tls, Some(Trust::Ca("ca.pem".into())));
        let plain = parse(&strings(&["http://127.0.0.1:80/"])).unwrap();
        assert_eq!(plain.target, Target::Listening("127.0.0.1:80".into()));
        assert_eq!(plain.tls, None);
    }

    #[test]
    fn refuses_bad_input_in_one_line() {
        for (args, says) in [
            (&["127.0.0.1:1", "bogus"][..], "unknown check \"bogus\""),
            (&[], "no target"),
            (&["a:1", "--window", "3"], "has no unit"),
            (&["a:1", "--window", "-3s"], "between 1 ms and 1 hour"),
            (&["a:1", "--slow-path", "x"], "is not a path"),
            (&["a:1", "--bogus"], "unknown doctor flag \"--bogus\""),
            (&["--port", "80"], "goes with a command"),
            (&["a:1", "--", "node"], "needs --port"),
            (&["a:1", "--max-in-flight", "2"], "between 16 and 1024"),
            (&["a:1", "--insecure"], "go with TLS"),
            (&["http://a:1", "--ca", "x.pem"], "go with TLS"),
            (&["https://a:1/x"], "a path with --path"),
            (&["https://a:1", "--h2c"], "--h2c is HTTP/2 without TLS"),
        ] {
            let error = parse(&strings(args)).unwrap_err();
            let text = format!("{error:#}");
            assert!(text.contains(says), "{args:?}: {text}");
            assert!(!text.contains('\n'), "{args:?}: {text}");
        }
        assert_eq!(duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
    }
}

/// `compare.rs`
mod compare {
    use lab_doctor::compare::*;

    #[test]
    fn reads_the_second_the_test_ended() {
        let report =
            "\u{1b}[0mWed Dec  2 2026:\u{1b}[0;36m\nTest ended on 6th second\nExit status:";
        assert_eq!(ended_second(report), Some(6));
        assert_eq!(ended_second("Test ended on 21st second"), Some(21));
        assert_eq!(ended_second("no such line"), None);
    }
}

/// `finding.rs`
mod finding {
    use lab_doctor::finding::*;

    /// The id mdBook gives a heading: lowercase, words joined by `-`,
    /// punctuation dropped.
    fn heading_id(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_check_links_a_heading_that_exists() {
        let book = concat!(env!("CARGO_MANIFEST_DIR"), "/../../book");
        for check in Check::ALL {
            let (page, fragment) = check.chapter().split_once('#').expect("a section");
            let source = page.replace(".html", ".md");
            let text = std::fs::read_to_string(format!("{book}/{source}"))
                .unwrap_or_else(|error| panic!("{}: book/{source}: {error}", check.name()));
            let ids: Vec<String> = text
                .lines()
                .filter_map(|line| line.strip_prefix('#'))
                .map(|line| heading_id(line.trim_start_matches('#')))
                .collect();
            assert!(
                ids.iter().any(|id| id == fragment),
                "{}: no heading #{fragment} in book/{source}",
                check.name()
            );
        }
    }
}

/// `expect.rs`: which findings break which rules.
mod expect {
    use lab_doctor::{
        expect::parse,
        finding::{Check, Finding},
    };

    fn findings() -> Vec<Finding> {
        vec![
            Finding::warn(
                Check::IdleKeepAlive,
                "still open at 45.00 s",
                Some(45.0),
                "x",
            ),
            Finding::pass(Check::SlowHead, "closed after 10.00 s", Some(10.0), "x"),
            Finding::pass(
                Check::Overload,
                "at 64 in flight: 900 calls",
                Some(40.0),
                "x",
            ),
            Finding::skip(Check::RetryAfter, "no refusals"),
        ]
    }

    fn broken(rules: &str) -> Vec<String> {
        parse(rules, "rules.toml")
            .unwrap()
            .judge(&findings())
            .broken
    }

    #[test]
    fn without_rules_a_warning_breaks_the_build_as_without_a_file() {
        assert_eq!(
            broken(""),
            ["idle-keepalive: warn (\"still open at 45.00 s\"), and fail-on holds \"warn\""]
        );
    }

    #[test]
    fn fail_on_is_the_files_then_the_checks_own() {
        assert!(broken("fail-on = [\"fail\"]").is_empty());
        let rules = "fail-on = []\n[checks.idle-keepalive]\nfail-on = [\"warn\"]";
        assert_eq!(broken(rules).len(), 1);
        let rules = "[checks.idle-keepalive]\nfail-on = []";
        assert!(broken(rules).is_empty());
    }

    #[test]
    fn bounds_are_in_the_checks_unit_and_inclusive() {
        let seconds = "fail-on = []\n[checks.slow-head]\nmin = \"10s\"\nmax = 10";
        assert!(broken(seconds).is_empty());
        let seconds = "fail-on = []\n[checks.slow-head]\nmax = \"9500ms\"";
        assert_eq!(
            broken(seconds),
            ["slow-head: max 9.5 s, measured \"closed after 10.00 s\""]
        );
        let count = "fail-on = []\n[checks.overload]\nmin = 41";
        assert_eq!(
            broken(count),
            ["overload: min 41, measured \"at 64 in flight: 900 calls\""]
        );
    }

    #[test]
    fn a_bound_on_a_skipped_check_or_one_that_did_not_run_is_broken() {
        let rules = "fail-on = []\n[checks.retry-after]\nmin = 1\n[checks.shutdown]\nmax = \"5s\"";
        assert_eq!(
            broken(rules),
            [
                "retry-after: min 1 s, but the check was skipped (no refusals)",
                "shutdown: the file has a rule for it, but it did not run",
            ]
        );
    }
}

/// `ci/`: the files the page "The doctor in CI" shows are the doctor's own
/// input: the rule file reads, and the job's command line parses.
mod ci {
    use lab_doctor::{
        Check, Target,
        expect::{self, Unit},
        options,
    };

    const CI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/ci");

    #[test]
    fn the_rule_file_the_page_shows_reads_and_bounds_what_the_book_advises() {
        let rules = expect::read(format!("{CI}/doctor-expect.toml").as_ref()).unwrap();
        let rule = |check: Check| rules.rules.iter().find(|rule| rule.check == check).unwrap();
        // Longer than the balancer's 60 s; a head cut within 90 s; 50 ms.
        assert_eq!(rule(Check::IdleKeepAlive).min, Some(61.0));
        assert_eq!(rule(Check::SlowHead).max, Some(90.0));
        assert_eq!(rule(Check::BlockedRuntime).max, Some(0.05));
        assert_eq!(expect::unit(Check::Overload), Unit::Count);
        assert_eq!(rule(Check::Overload).min, Some(1.0));
    }

    #[test]
    fn the_jobs_command_line_parses_as_the_doctor_reads_it() {
        let job = std::fs::read_to_string(format!("{CI}/github-actions.yml")).unwrap();
        let (_, after) = job.split_once("target/release/doctor").unwrap();
        let (command, _) = after.split_once("- name:").unwrap();
        let words: Vec<String> = command
            .split_whitespace()
            .map(|word| match word {
                "doctor-expect.toml" => format!("{CI}/doctor-expect.toml"),
                word => word.to_string(),
            })
            .collect();
        let options = options::parse(&words).unwrap();
        assert!(options.expect.is_some());
        assert_eq!(
            options.json_out.as_deref(),
            Some(std::path::Path::new("doctor.json"))
        );
        assert!(matches!(options.target, Target::Command { port: 8080, .. }));
        // The window is above every bound of the rule file.
        assert!(options.window.as_secs_f64() > 90.0);
    }
}
