//! # Exercise: password hashing on the runtime's workers
//!
//! `POST /login` stretches the password it is given (as bcrypt or argon2
//! would, with a cost tuned to a few hundred milliseconds of CPU) before it
//! compares it with the stored hash. The service runs on a tokio runtime
//! with two worker threads. During a burst of logins, `/health` and every
//! other route stall, and the orchestrator's probes start to time out.
//!
//! Verify: `cargo xtask exercise verify blocking-lag-spawn-blocking`.

use std::time::{Duration, Instant};

/// Key stretching: rounds of FNV-1a over the password until `cost` of CPU
/// time has gone by, as a bcrypt cost factor is tuned to a time. Pure CPU
/// work, no `.await` anywhere inside.
pub fn stretch(password: &str, cost: Duration) -> u64 {
    let started = Instant::now();
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    while started.elapsed() < cost {
        for byte in password.bytes() {
            digest = (digest ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    digest
}

/// `POST /login`: the password's stretched hash, as hex.
pub async fn login(cost: Duration, password: String) -> String {
    // TODO: for `cost`, this call holds the worker thread that polls this
    // future. What else was waiting for that thread, and where should CPU
    // work of this size run instead?
    let digest = stretch(&password, cost);
    format!("{digest:016x}\n")
}
