//! Experiment 3, day and night: open-loop Poisson traffic through the pooling
//! balancer with a link delay, at rates from a quiet night to a busy day, with
//! the backend's idle timeout below and above the balancer's.

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, ensure};
use lab_kit::Series;
use seeded_rng::SplitMix64;
use serde::Serialize;

use crate::{
    Config,
    access_log::AccessLine,
    backend::{Backend, BackendKind},
    balancer::{PoolingBalancer, PoolingBalancerConfig, PoolingBalancerStats},
    join_all,
    link_delay::LinkDelay,
    wire::Wire,
};

lab_kit::series! {
    /// The two backends of the day-and-night experiment.
    pub enum Case in "day-night" {
        /// Backend idle timeout below the balancer's: the backend closes first.
        BackendBelow => "backend-below",
        /// Backend idle timeout above the balancer's: the balancer closes first.
        BackendAbove => "backend-above",
    }
}

impl Case {
    /// The backend's idle timeout in this case, production seconds.
    pub fn backend_idle_s(self, config: &Config) -> f64 {
        match self {
            Case::BackendBelow => config.backend_below_idle_s,
            Case::BackendAbove => config.backend_above_idle_s,
        }
    }
}

/// One rate of one case.
#[derive(Debug, Clone, Serialize)]
pub struct RatePoint {
    pub rate_per_s: f64,
    /// The same rate at production scale, requests per minute.
    pub rate_per_min_production: f64,
    pub requests: u64,
    pub ok: u64,
    pub bad_gateway: u64,
    /// Other failures seen by the client (timeouts, connection errors).
    pub other_errors: u64,
    /// 502s per 100 requests.
    pub bad_gateway_pct: f64,
    pub upstream_connects: u64,
    pub bad_gateway_on_reused: u64,
    pub dropped_seen_closed: u64,
    pub dropped_idle: u64,
    /// Independent stacks that ran this rate at once (counts are summed).
    pub copies: u64,
    /// Access-log lines with the race's signature: `elb_status_code` 502,
    /// `target_status_code` `-`, `target_processing_time` -1.
    pub log_502_no_target_response: u64,
    /// Access-log lines where the target itself answered 5xx (what
    /// `HTTPCode_Target_5XX_Count` counts).
    pub log_target_5xx: u64,
    /// The first 502 line and the first 200 line of the log, as examples
    /// (not a sample field: the records carry them as `access-log` samples).
    #[serde(skip)]
    pub example_lines: Vec<(u16, String)>,
}

// ANCHOR: stack
/// Backend, link delay and balancer, wired up: the client talks to
/// `balancer.addr`; the balancer's pool talks to the backend through the link.
pub struct Stack {
    pub backend: Backend,
    pub link: LinkDelay,
    pub balancer: PoolingBalancer,
}

impl Stack {
    pub async fn spawn(config: &Config, case: Case) -> Result<Stack> {
        let backend = Backend::spawn(BackendKind::HyperTimer {
            header_read_timeout: config.lab(case.backend_idle_s(config)),
        })
        .await?;
        let link = LinkDelay::spawn(backend.addr, config.link_delay()).await?;
        let balancer = PoolingBalancer::spawn(PoolingBalancerConfig {
            upstream: link.addr,
            idle_timeout: config.lab(config.balancer_idle_s),
            response_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
        })
        .await?;
        Ok(Stack {
            backend,
            link,
            balancer,
        })
    }
}
// ANCHOR_END: stack

/// An exponential gap with mean `1 / rate`: Poisson arrivals.
fn exponential(random: &mut SplitMix64, rate: f64) -> f64 {
    -(1.0 - random.unit()).ln() / rate
}

/// One request through the balancer on a fresh client connection; the
/// status, or `None` when the client saw no response at all.
async fn one_request(balancer: SocketAddr) -> Option<u16> {
    let exchange = async {
        let mut wire = Wire::connect(balancer, Duration::from_secs(2)).await.ok()?;
        wire.send(b"GET / HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        wire.read_response("GET")
            .await
            .ok()
            .map(|response| response.status)
    };
    tokio::time::timeout(Duration::from_secs(8), exchange)
        .await
        .ok()
        .flatten()
}

/// Open-loop Poisson traffic at `rate` for `duration` through a fresh stack.
pub async fn run_rate(config: &Config, case: Case, rate: f64, seed: u64) -> Result<RatePoint> {
    ensure!(rate > 0.0, "rates must be positive");
    let stack = Stack::spawn(config, case).await?;
    let duration = Duration::from_secs_f64(config.traffic_s);
    let mut random = SplitMix64::new(seed);
    let started = Instant::now();
    let mut requests = tokio::task::JoinSet::new();
    let mut at = exponential(&mut random, rate);
    while at < duration.as_secs_f64() {
        tokio::time::sleep_until((started + Duration::from_secs_f64(at)).into()).await;
        requests.spawn(one_request(stack.balancer.addr));
        at += exponential(&mut random, rate);
    }
    let (mut ok, mut bad_gateway, mut other_errors, mut total) = (0u64, 0u64, 0u64, 0u64);
    while let Some(joined) = requests.join_next().await {
        total += 1;
        match joined.context("a request task panicked")? {
            Some(200) => ok += 1,
            Some(502) => bad_gateway += 1,
            _ => other_errors += 1,
        }
    }
    let stats: PoolingBalancerStats = stack.balancer.stats();
    let (log, _not_kept) = stack.balancer.access_log();
    let count = |keep: fn(&AccessLine) -> bool| log.iter().filter(|line| keep(line)).count() as u64;
    let mut example_lines = Vec::new();
    for status in [502, 200] {
        if let Some(line) = log.iter().find(|line| line.elb_status_code == status) {
            example_lines.push((status, line.render()));
        }
    }
    Ok(RatePoint {
        rate_per_s: rate,
        rate_per_min_production: rate * 60.0 / config.time_scale,
        requests: total,
        ok,
        bad_gateway,
        other_errors,
        bad_gateway_pct: percent(bad_gateway, total),
        upstream_connects: stats.upstream_connects,
        bad_gateway_on_reused: stats.bad_gateway_on_reused,
        dropped_seen_closed: stats.dropped_seen_closed,
        dropped_idle: stats.dropped_idle,
        copies: 1,
        log_502_no_target_response: count(AccessLine::is_balancer_502_without_target_response),
        log_target_5xx: count(AccessLine::is_target_5xx),
        example_lines,
    })
}

/// The totals of one case.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CaseTotals {
    pub backend_idle_s: f64,
    pub balancer_idle_s: f64,
    pub link_delay_ms: f64,
    pub requests: u64,
    pub bad_gateway: u64,
    pub bad_gateway_on_reused: u64,
    pub other_errors: u64,
    /// 502s at the rates up to 8 per lab second ("night").
    pub bad_gateway_low_rates: u64,
    /// 502s per 100 requests at those rates, and at the rates above them.
    pub bad_gateway_pct_low_rates: f64,
    pub bad_gateway_pct_high_rates: f64,
    /// The access log's 502s without a target response, and its target 5xx.
    pub log_502_no_target_response: u64,
    pub log_target_5xx: u64,
}

/// Both cases, every rate, all at once. Returns the points by case.
pub async fn day_and_night(config: &Config) -> Result<Vec<(Case, Vec<RatePoint>)>> {
    let seed_base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos() as u64)
        .unwrap_or(7);
    let mut jobs = Vec::new();
    for case in [Case::BackendBelow, Case::BackendAbove] {
        for (index, &rate) in config.rates_per_s.iter().enumerate() {
            // A night rate sends few requests in a few seconds; independent
            // copies of the stack give it enough to read a share from.
            let copies = if rate <= config.night_rate_limit {
                config.night_copies
            } else {
                1
            };
            for copy in 0..copies {
                let config = config.clone();
                let seed = seed_base
                    ^ ((index as u64 + 1) << 32)
                    ^ ((copy as u64 + 1) << 48)
                    ^ (case as u64);
                jobs.push(async move { (case, index, run_rate(&config, case, rate, seed).await) });
            }
        }
    }
    let mut by_case: Vec<(Case, Vec<Option<RatePoint>>)> = vec![
        (Case::BackendBelow, vec![None; config.rates_per_s.len()]),
        (Case::BackendAbove, vec![None; config.rates_per_s.len()]),
    ];
    for (case, index, point) in join_all(jobs.into_iter()).await {
        let point = point.with_context(|| case.series())?;
        let slot = by_case
            .iter_mut()
            .find(|(slot_case, _)| *slot_case == case)
            .expect("every case has a slot");
        let merged = match slot.1[index].take() {
            Some(earlier) => earlier.merge(&point),
            None => point,
        };
        slot.1[index] = Some(merged);
    }
    Ok(by_case
        .into_iter()
        .map(|(case, points)| (case, points.into_iter().flatten().collect()))
        .collect())
}

impl RatePoint {
    /// Two runs at the same rate, counted together.
    fn merge(&self, other: &RatePoint) -> RatePoint {
        let requests = self.requests + other.requests;
        let bad_gateway = self.bad_gateway + other.bad_gateway;
        RatePoint {
            rate_per_s: self.rate_per_s,
            rate_per_min_production: self.rate_per_min_production,
            requests,
            ok: self.ok + other.ok,
            bad_gateway,
            other_errors: self.other_errors + other.other_errors,
            bad_gateway_pct: percent(bad_gateway, requests),
            upstream_connects: self.upstream_connects + other.upstream_connects,
            bad_gateway_on_reused: self.bad_gateway_on_reused + other.bad_gateway_on_reused,
            dropped_seen_closed: self.dropped_seen_closed + other.dropped_seen_closed,
            dropped_idle: self.dropped_idle + other.dropped_idle,
            copies: self.copies + other.copies,
            log_502_no_target_response: self.log_502_no_target_response
                + other.log_502_no_target_response,
            log_target_5xx: self.log_target_5xx + other.log_target_5xx,
            example_lines: merge_examples(&self.example_lines, &other.example_lines),
        }
    }
}

/// The first example line of each status, from `first`, then `second`.
fn merge_examples(first: &[(u16, String)], second: &[(u16, String)]) -> Vec<(u16, String)> {
    let mut merged: Vec<(u16, String)> = Vec::new();
    for (status, line) in first.iter().chain(second) {
        if !merged.iter().any(|(kept, _)| kept == status) {
            merged.push((*status, line.clone()));
        }
    }
    merged
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Sums one case's points.
pub fn totals(config: &Config, case: Case, points: &[RatePoint]) -> CaseTotals {
    let mut totals = CaseTotals {
        backend_idle_s: case.backend_idle_s(config),
        balancer_idle_s: config.balancer_idle_s,
        link_delay_ms: config.link_delay_ms,
        ..CaseTotals::default()
    };
    let mut requests_low_rates = 0;
    for point in points {
        totals.requests += point.requests;
        totals.bad_gateway += point.bad_gateway;
        totals.bad_gateway_on_reused += point.bad_gateway_on_reused;
        totals.other_errors += point.other_errors;
        if point.rate_per_s <= config.night_rate_limit {
            totals.bad_gateway_low_rates += point.bad_gateway;
            requests_low_rates += point.requests;
        }
        totals.log_502_no_target_response += point.log_502_no_target_response;
        totals.log_target_5xx += point.log_target_5xx;
    }
    totals.bad_gateway_pct_low_rates = percent(totals.bad_gateway_low_rates, requests_low_rates);
    totals.bad_gateway_pct_high_rates = percent(
        totals.bad_gateway - totals.bad_gateway_low_rates,
        totals.requests - requests_low_rates,
    );
    totals
}

/// One line of the balancer's access log, as the lab records it.
#[derive(Debug, Clone, Serialize)]
pub struct LogExample {
    pub case: String,
    pub elb_status_code: u16,
    pub line: String,
}

/// Each case's first 502 line and first 200 line (the 502 from the highest
/// rate that had one), for the chapter's example.
pub fn log_examples(cases: &[(Case, Vec<RatePoint>)]) -> Vec<LogExample> {
    let mut examples = Vec::new();
    for (case, points) in cases {
        for status in [502, 200] {
            let found = points
                .iter()
                .rev()
                .flat_map(|point| &point.example_lines)
                .find(|(kept, _)| *kept == status);
            if let Some((_, line)) = found {
                examples.push(LogExample {
                    case: case.name().to_string(),
                    elb_status_code: status,
                    line: line.clone(),
                });
            }
        }
    }
    examples
}
