//! The process groups the xtask started (labs, chromedriver and its Chromium),
//! killed when the xtask itself is stopped by a signal. Drop guards cover
//! every normal exit path; this covers Ctrl-C, `kill` and a closed terminal,
//! where no destructor runs.

use std::sync::atomic::{AtomicI32, Ordering};

const SLOTS: usize = 32;

/// Process group ids currently alive; 0 marks a free slot. Atomics, because
/// the signal handler reads them and may do nothing that could block.
static GROUPS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// Installs the handler for SIGINT, SIGTERM and SIGHUP.
pub fn install() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only performs async-signal-safe work (atomic loads,
    // kill(2), _exit(2)).
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGHUP, handler);
    }
}

/// Remembers a process group so a signal to the xtask kills it too.
pub fn register(group: libc::pid_t) {
    for slot in &GROUPS {
        if slot
            .compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return;
        }
    }
}

/// Forgets a process group that has been killed and reaped.
pub fn unregister(group: libc::pid_t) {
    for slot in &GROUPS {
        let _ = slot.compare_exchange(group, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    for slot in &GROUPS {
        let group = slot.load(Ordering::SeqCst);
        // Only kill(2) inside: async-signal-safe.
        lab_kit::process::kill_group(group);
    }
    // SAFETY: _exit(2) is async-signal-safe; 128 + signal is the shell's convention.
    unsafe { libc::_exit(128 + signal) }
}
