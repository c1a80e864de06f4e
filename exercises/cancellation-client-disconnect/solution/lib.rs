//! The solution: the call is awaited in the handler's own future, not in a
//! spawned task. When the client goes away, hyper drops that future, the
//! drop reaches the `.await` on the call, reqwest closes its connection, and
//! the pricing service drops its own handler: the work stops.
//! (Where the work must be spawned, tie it to the request with a
//! `CancellationToken` and a drop guard instead.)

/// `GET /quote`: the price from the pricing service at `pricing_url`.
pub async fn quote(client: reqwest::Client, pricing_url: String) -> String {
    let price = async { client.get(&pricing_url).send().await?.text().await };
    price.await.unwrap_or_else(|_| "no price\n".to_string())
}
