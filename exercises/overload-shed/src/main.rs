//! The check: serves a 100 ms work route behind the piece's admission
//! policy, sends a burst ten times its worker count at once, and times every
//! answer: how long the admitted requests took, and whether the others were
//! refused at once with a 503 that says when to come back.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Result;
use axum::{Router, routing::get};
use exercise_kit::{Variant, Verdict};
use lab_kit::stats::Latencies;

exercise_kit::exercise!(
    "a limit that waits for a free worker is a queue: shed what cannot start now (tower's \
     `load_shed` over the limit, or a semaphore's `try_acquire`) and answer it with a 503 and \
     `Retry-After`",
);

const WORKERS: usize = 4;
const SERVICE: Duration = Duration::from_millis(100);
const BURST: usize = 40;

/// One answer: its status, whether it said when to retry, and its time.
struct Answer {
    status: u16,
    retry_after: bool,
    took: Duration,
}

async fn send(client: reqwest::Client, url: String) -> Answer {
    let started = Instant::now();
    let answered = client
        .get(&url)
        .timeout(Duration::from_secs(6))
        .send()
        .await;
    let (status, retry_after) = match answered {
        Ok(response) => (
            response.status().as_u16(),
            response.headers().contains_key("retry-after"),
        ),
        Err(_) => (0, false),
    };
    Answer {
        status,
        retry_after,
        took: started.elapsed(),
    }
}

async fn check(variant: Variant) -> Result<Verdict> {
    let admit: fn(Router, usize) -> Router = variant.pick(overload_shed::admit, solution::admit);
    let work = Router::new().route("/work", get(|| tokio::time::sleep(SERVICE)));
    let server = lab_kit::server::spawn_axum(admit(work, WORKERS)).await?;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let mut burst = tokio::task::JoinSet::new();
    for _ in 0..BURST {
        burst.spawn(send(client.clone(), server.url("/work")));
    }
    let answers = burst.join_all().await;
    drop(server);

    let (mut admitted, mut refused) = (Latencies::default(), Latencies::default());
    let (mut refused_without_retry_after, mut other) = (0, 0);
    for answer in &answers {
        match answer.status {
            200 => admitted.record(answer.took),
            503 => {
                refused.record(answer.took);
                refused_without_retry_after += usize::from(!answer.retry_after);
            }
            _ => other += 1,
        }
    }
    let (ok, no) = (admitted.summary(), refused.summary());
    let service_ms = SERVICE.as_millis() as f64;
    if other > 0 || ok.count < WORKERS {
        return Ok(Verdict::fail(format!(
            "of {BURST} requests at once, {} were served, {} refused and {other} failed or got \
             another status: the {WORKERS} workers must still serve what they can take",
            ok.count, no.count
        )));
    }
    if ok.p99_ms > 3.0 * service_ms {
        return Ok(Verdict::fail(format!(
            "of {BURST} requests at once on {WORKERS} workers of {service_ms:.0} ms, {} were \
             served with a p99 of {:.0} ms ({:.0} service times) and {} refused: every request \
             was queued behind the limit, so the whole burst got slow and a client with a \
             shorter timeout would have given up and retried into the same line",
            ok.count,
            ok.p99_ms,
            ok.p99_ms / service_ms,
            no.count
        )));
    }
    if refused_without_retry_after > 0 || no.max_ms > 2.0 * service_ms {
        return Ok(Verdict::fail(format!(
            "the served requests were fast (p99 {:.0} ms), but of {} refusals the slowest took \
             {:.0} ms and {refused_without_retry_after} carried no Retry-After: a refusal should \
             be immediate and say when to come back",
            ok.p99_ms, no.count, no.max_ms
        )));
    }
    Ok(Verdict::pass(format!(
        "of {BURST} requests at once on {WORKERS} workers of {service_ms:.0} ms, {} were served \
         with a p99 of {:.0} ms and {} were refused with 503 and Retry-After within {:.0} ms: \
         the burst cost the admitted requests nothing",
        ok.count, ok.p99_ms, no.count, no.max_ms
    )))
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
