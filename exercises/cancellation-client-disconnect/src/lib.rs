//! # Exercise: work that outlives its client
//!
//! `GET /quote` asks a slow pricing service (12 s in production) and answers
//! with its price. Most users give up after 2 s. The pricing service is
//! expensive and shared, so a call nobody waits for any more should stop.
//!
//! Verify: `cargo xtask exercise verify cancellation-client-disconnect`.

/// `GET /quote`: the price from the pricing service at `pricing_url`.
pub async fn quote(client: reqwest::Client, pricing_url: String) -> String {
    // TODO: when the client disconnects, hyper drops this handler's future.
    // Which of the work below does that drop reach, and which runs on?
    let pricing = tokio::spawn(async move {
        let response = client.get(&pricing_url).send().await?;
        response.text().await
    });
    match pricing.await {
        Ok(Ok(price)) => price,
        _ => "no price\n".to_string(),
    }
}
