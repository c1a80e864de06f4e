//! What the kernel's `/proc/self` files do that the labs rely on, observed
//! on this process: blocking-lag's report servers reset their peak resident
//! size after filling their database, so the peak they report is the report's.

/// One `<key>:   1234 kB` line of /proc/self/status, in KiB.
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no {key} line in /proc/self/status"))
}

#[test]
fn writing_5_to_clear_refs_resets_the_peak_rss() {
    const BYTES: usize = 64 * 1024 * 1024;
    // 64 MiB mapped and touched page by page (mmap directly, so that the
    // allocator cannot keep it after we give it back), then unmapped.
    // SAFETY: an anonymous private mapping of BYTES bytes; every write
    // below stays inside it, and it is unmapped once, with its own length.
    let peak_kib = unsafe {
        let memory = libc::mmap(
            std::ptr::null_mut(),
            BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(memory, libc::MAP_FAILED, "mmap of 64 MiB");
        let bytes = memory.cast::<u8>();
        for offset in (0..BYTES).step_by(4096) {
            bytes.add(offset).write_volatile(1);
        }
        let peak_kib = status_kib("VmHWM");
        assert_eq!(libc::munmap(memory, BYTES), 0, "munmap");
        peak_kib
    };
    // The peak is a high-water mark: giving the memory back leaves it (the
    // kernel's counters lag by a few hundred KiB; 8 MiB is the margin).
    let kept_kib = status_kib("VmHWM");
    assert!(
        kept_kib + 8 * 1024 >= peak_kib,
        "VmHWM {kept_kib} KiB after munmap, {peak_kib} KiB at the peak"
    );
    std::fs::write("/proc/self/clear_refs", "5").expect("writing 5 to /proc/self/clear_refs");
    // Reset to the current resident size: well below the peak (other tests
    // of this binary run meanwhile, so a margin of half the mapping).
    let after_kib = status_kib("VmHWM");
    assert!(
        after_kib + 32 * 1024 < peak_kib,
        "VmHWM {after_kib} KiB after the reset, {peak_kib} KiB at the peak"
    );
}
