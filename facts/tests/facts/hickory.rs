//! hickory-resolver's `ResolverOpts::default()` at the pinned version, read
//! at run time: the values the DNS chapter quotes (its own lab measures the
//! cache and the questions on a real DNS server on loopback).

use hickory_resolver::config::ResolverOpts;

#[test]
fn resolver_opts_default_ndots_1_cache_8192_timeout_5_s_2_attempts() {
    let options = ResolverOpts::default();
    assert_eq!(options.ndots, 1, "not the 5 of a Kubernetes pod");
    assert_eq!(options.cache_size, 8192);
    assert_eq!(options.timeout, std::time::Duration::from_secs(5));
    assert_eq!(options.attempts, 2);
    assert_eq!(format!("{:?}", options.ip_strategy), "Ipv6AndIpv4");
}
