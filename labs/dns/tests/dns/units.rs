//! The library's own tests, moved here from `#[cfg(test)]` modules: a library's unit
//! tests are a second build of the whole library at opt-level 3 (8 to 9 s here);
//! in this binary they reuse the library `cargo xtask book` built.

/// `max_age.rs`
mod max_age {
    use std::time::Duration;

    use lab_dns::max_age::*;

    #[test]
    fn a_new_client_only_after_max_age() {
        let built = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = std::sync::Arc::clone(&built);
        let clients = MaxAgeClient::new(Duration::from_millis(50), move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            reqwest::Client::builder().no_proxy().build()
        })
        .unwrap();
        clients.client().unwrap();
        clients.client().unwrap();
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
        std::thread::sleep(Duration::from_millis(60));
        clients.client().unwrap();
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

/// `dns_server.rs`
mod dns_server {
    use std::{net::IpAddr, time::Instant};

    use lab_dns::dns_server::*;

    fn question(name: &str, kind: u16) -> Vec<u8> {
        let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            query.push(label.len() as u8);
            query.extend_from_slice(label.as_bytes());
        }
        query.push(0);
        query.extend_from_slice(&kind.to_be_bytes());
        query.extend_from_slice(&CLASS_IN.to_be_bytes());
        query
    }

    #[test]
    fn answers_known_names_and_logs_every_question() {
        let mut zone = Zone {
            ttl_s: 7,
            ..Zone::default()
        };
        zone.records
            .insert("api.lab.test".into(), vec![IpAddr::from([127, 0, 0, 2])]);
        let started = Instant::now();
        let reply = respond(&question("API.lab.test", TYPE_A), &mut zone, started).unwrap();
        assert_eq!(&reply[..2], &[0x12, 0x34]);
        assert_eq!(reply[3] & 0x0f, 0, "NOERROR");
        assert_eq!(u16::from_be_bytes([reply[6], reply[7]]), 1, "one answer");
        assert_eq!(&reply[reply.len() - 4..], &[127, 0, 0, 2]);
        assert_eq!(
            &reply[reply.len() - 10..reply.len() - 6],
            &7u32.to_be_bytes()
        );
        let missing = respond(&question("nope.lab.test", TYPE_A), &mut zone, started).unwrap();
        assert_eq!(missing[3] & 0x0f, 3, "NXDOMAIN");
        assert_eq!(missing[9], 1, "an SOA in the authority section");
        let no_v6 = respond(&question("api.lab.test", TYPE_AAAA), &mut zone, started).unwrap();
        assert_eq!(no_v6[3] & 0x0f, 0);
        assert_eq!(u16::from_be_bytes([no_v6[6], no_v6[7]]), 0, "NODATA");
        let outcomes: Vec<&str> = zone.log.iter().map(|query| query.outcome).collect();
        assert_eq!(outcomes, ["answer", "nxdomain", "nodata"]);
        assert!(respond(&[0; 5], &mut zone, started).is_none());
    }
}
