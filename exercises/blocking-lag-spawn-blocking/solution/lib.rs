//! The solution: the stretching runs on tokio's blocking pool
//! (`spawn_blocking`), threads that exist for work that does not yield. The
//! handler's future only waits for its result, so the two worker threads
//! stay free to poll every other request, `/health` included.

use std::time::Duration;

use blocking_lag_spawn_blocking::stretch;

/// `POST /login`: the password's stretched hash, as hex.
pub async fn login(cost: Duration, password: String) -> String {
    let hashing = tokio::task::spawn_blocking(move || stretch(&password, cost));
    match hashing.await {
        Ok(digest) => format!("{digest:016x}\n"),
        // A panic in the hashing: an answer, not a dead connection.
        Err(_) => "hashing failed\n".to_string(),
    }
}
