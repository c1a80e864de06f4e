//! One millisecond clock for every process of a lab: CLOCK_MONOTONIC.
//!
//! Some labs measure across processes: a prober process times answers from a
//! server, a server child logs "SIGTERM received" while the lab logs "request
//! started". `std::time::Instant` cannot cross a process boundary: it is
//! opaque, so there is no way to print one in the child and read it back in
//! the parent. [`monotonic_ms`] reads the clock `Instant` itself uses on Linux,
//! CLOCK_MONOTONIC, as a plain number. That clock is one per machine (it counts
//! from boot, the same for every process), so a timestamp taken in a child
//! and one taken in the lab land on one timeline and can be subtracted.
//!
//! Why not the wall clock (`SystemTime`)? NTP may step or slew it while a lab
//! runs, and a step in the middle of a measurement turns a 2 ms answer into a
//! negative or a 1000 ms one. CLOCK_MONOTONIC never goes backwards.

/// Milliseconds on CLOCK_MONOTONIC: comparable between processes on this
/// machine, meaningless on another one or after a reboot.
pub fn monotonic_ms() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    // CLOCK_MONOTONIC always exists on Linux, so it cannot fail here.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
    }
    now.tv_sec as f64 * 1000.0 + now.tv_nsec as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// Set in the environment of the re-executed test binary.
    const CHILD: &str = "LAB_KIT_CLOCK_CHILD";
    const MARK: &str = "child-monotonic-ms=";

    /// In the test run, checks that the clock never goes backwards. When the
    /// test below re-executes this binary with [`CHILD`] set, it also prints
    /// its reading of the clock for the parent.
    #[test]
    fn reads_a_clock_that_never_goes_backwards() {
        let first = monotonic_ms();
        let second = monotonic_ms();
        assert!(first > 0.0 && second >= first, "{first} then {second}");
        if std::env::var_os(CHILD).is_some() {
            // On a line of its own: the harness has just printed "test ... ".
            println!("\n{MARK}{second}");
        }
    }

    /// The child's reading lies between the parent's reading before it
    /// started the child and the one after the child ended: the two
    /// processes read one clock. (With `Instant`s, or with a clock counted
    /// from each process's start, the child's number would be near zero.)
    #[test]
    fn agrees_with_a_re_executed_child() {
        let exe = std::env::current_exe().expect("the test binary's path");
        let before = monotonic_ms();
        let output = Command::new(exe)
            .args([
                "--exact",
                "clock::tests::reads_a_clock_that_never_goes_backwards",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .expect("the test binary runs again");
        let after = monotonic_ms();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "the child failed: {stdout}");
        let child: f64 = stdout
            .lines()
            .find_map(|line| line.split_once(MARK).map(|(_, number)| number))
            .expect("the child printed its clock")
            .trim()
            .parse()
            .expect("a number");
        assert!(
            before <= child && child <= after,
            "child {child} outside the parent's [{before}, {after}]"
        );
        // The bound is the child's whole life, which a 2-core machine under
        // load keeps well under a minute.
        assert!(after - before < 60_000.0, "{} ms", after - before);
    }
}
