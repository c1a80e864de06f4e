//! How often one shared HTTP/2 client opens a second connection.
//!
//! The `http2` setup of the lab usually accepts exactly one connection, but the
//! race in hyper-util's pool (a checkout and a new connection started side by
//! side) sometimes leaves a second one. This loop measures how often:
//!
//! ```console
//! $ cargo run --release -p lab-conn-reuse --example h2_second_connection -- 400
//! ```
//!
//! Each round is a fresh server and a fresh client: 100 requests, 50 in flight.
//! It prints one line: how many rounds accepted 1, 2, ... connections.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::anyhow;
use lab_conn_reuse::{Setup, measure};
use lab_kit::exit::{self, Exit};

/// Rounds when no count is given, and the most the loop accepts (each round
/// takes a few milliseconds, so the loop stays well under a minute).
const DEFAULT_ROUNDS: usize = 400;
const MAX_ROUNDS: usize = 5_000;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let program = "h2_second_connection";
    let rounds = match std::env::args().nth(1).map(|arg| arg.parse::<usize>()) {
        None => DEFAULT_ROUNDS,
        Some(Ok(rounds)) if (1..=MAX_ROUNDS).contains(&rounds) => rounds,
        Some(_) => {
            let error =
                anyhow!("the number of rounds must be a whole number from 1 to {MAX_ROUNDS}");
            return exit::exit_code(program, Err(error));
        }
    };
    let mut accepted: BTreeMap<u64, usize> = BTreeMap::new();
    for _ in 0..rounds {
        match measure(Setup::Http2, 100, 50, 64).await {
            Ok(summary) => *accepted.entry(summary.connections).or_default() += 1,
            Err(error) => {
                // A round that fails ends the loop as a failed run.
                exit::report(program, &error);
                return Exit::Failed.into();
            }
        }
    }
    let counts: Vec<String> = accepted
        .iter()
        .map(|(connections, rounds)| format!("{connections} connection(s): {rounds} rounds"))
        .collect();
    println!(
        "{rounds} rounds of 100 HTTP/2 requests, 50 in flight: {}",
        counts.join(", ")
    );
    ExitCode::SUCCESS
}
