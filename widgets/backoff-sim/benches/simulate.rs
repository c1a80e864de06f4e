//! Native time per simulation run at 100 clients, per strategy, with std::time
//! only: `cargo bench -p backoff-sim`. Prints median and p95 over many runs.

use std::{hint::black_box, time::Instant};

use backoff_sim::{SimConfig, Strategy, simulate};

fn main() {
    const RUNS: u64 = 200;
    println!("backoff-sim: native time per run at 100 clients ({RUNS} runs each)");
    for strategy in Strategy::ALL {
        let mut micros = Vec::with_capacity(RUNS as usize);
        let mut calls = 0u64;
        for seed in 0..RUNS {
            let config = SimConfig::published(100, strategy, seed);
            let started = Instant::now();
            let result = black_box(simulate(black_box(&config)));
            micros.push(started.elapsed().as_secs_f64() * 1e6);
            calls += result.calls;
        }
        micros.sort_by(f64::total_cmp);
        let median = micros[micros.len() / 2];
        let p95 = micros[micros.len() * 95 / 100];
        println!(
            "{:<13} median {median:>8.1} us  p95 {p95:>8.1} us  mean calls {:>7.0}",
            strategy.name(),
            calls as f64 / RUNS as f64
        );
    }
}
