//! The check: the catalog on 127.0.0.1 behind the labs' counting listener
//! (`lab_kit::server::spawn_axum`), 20 lookups in a row through one
//! `Catalog`, and the number of TCP connections the server accepted.

use std::{process::ExitCode, time::Duration};

use anyhow::{Context, Result, ensure};
use axum::{Router, extract::Path, routing::get};
use exercise_kit::{Variant, Verdict};
use lab_kit::{
    procnet::{TcpState, count_toward},
    server::spawn_axum,
};

exercise_kit::exercise!(
    "the connection pool lives inside a reqwest::Client and dies with it: build the client \
     once, with the Catalog, keep it there, and send every request through it",
);

const LOOKUPS: u32 = 20;
/// A pool that reuses its connections needs one, sometimes two (a request
/// can leave before the previous connection is back in the pool): well
/// under this.
const REUSED_AT_MOST: u64 = 5;

/// The reader's `Catalog` and the solution's, as the check uses them.
trait Lookups: Sized {
    fn open(base_url: &str) -> Result<Self>;
    async fn lookup(&self, id: u32) -> Result<String>;
}

impl Lookups for conn_reuse_shared_client::Catalog {
    fn open(base_url: &str) -> Result<Self> {
        Self::new(base_url)
    }
    async fn lookup(&self, id: u32) -> Result<String> {
        self.item(id).await
    }
}

impl Lookups for solution::Catalog {
    fn open(base_url: &str) -> Result<Self> {
        Self::new(base_url)
    }
    async fn lookup(&self, id: u32) -> Result<String> {
        self.item(id).await
    }
}

/// `LOOKUPS` lookups in a row through one catalog; each answer is checked.
async fn lookups<C: Lookups>(base_url: &str) -> Result<()> {
    let catalog = C::open(base_url)?;
    for id in 0..LOOKUPS {
        let answer = tokio::time::timeout(Duration::from_secs(5), catalog.lookup(id))
            .await
            .with_context(|| format!("lookup {id} still waiting after 5 s"))?
            .with_context(|| format!("lookup {id}"))?;
        ensure!(
            answer == format!("item {id}"),
            "lookup {id} returned {answer:?}"
        );
    }
    Ok(())
}

async fn check(variant: Variant) -> Result<Verdict> {
    let app = Router::new().route(
        "/items/{id}",
        get(|Path(id): Path<u32>| async move { format!("item {id}") }),
    );
    let server = spawn_axum(app).await?;
    let base_url = server.url("");
    let port = server.addr.port();
    // The port may have been used before: count only what this run adds.
    let time_wait_before = count_toward(port, TcpState::TimeWait)?;
    match variant {
        Variant::Yours => lookups::<conn_reuse_shared_client::Catalog>(&base_url).await?,
        Variant::Solution => lookups::<solution::Catalog>(&base_url).await?,
    }
    let accepted = server.stats.accepted();
    // The catalog (and its clients) are gone: wait until the server has seen
    // every connection close (bounded), then read the socket table.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while server.stats.open() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let time_wait = count_toward(port, TcpState::TimeWait)?.saturating_sub(time_wait_before);
    server.stop(Duration::from_secs(1)).await?;
    Ok(if accepted <= REUSED_AT_MOST {
        Verdict::pass(format!(
            "the server accepted {accepted} connection(s) for {LOOKUPS} lookups in a row: \
             the catalog's pool handed the same connection to one request after another"
        ))
    } else {
        Verdict::fail(format!(
            "the server accepted {accepted} connections for {LOOKUPS} requests made one after \
             another, and {time_wait} client-side sockets were left in TIME_WAIT: each request \
             started from an empty pool and paid a new TCP handshake (over TLS, a key exchange \
             too), and its client closed the connection when it was dropped"
        ))
    })
}

fn main() -> ExitCode {
    exercise_kit::main(EXERCISE, check)
}
