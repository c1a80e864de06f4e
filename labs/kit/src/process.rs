//! How every child process of the project is started, labs' and xtask's
//! alike: in its own process group, and killed by the kernel when the process
//! that started it dies. [`crate::child::ChildGuard`] adds the kill-on-drop on
//! top; the xtask, which has no async runtime, uses this alone.

use std::{io, os::unix::process::CommandExt, process::Command};

/// Prepares `command` so that the child it starts
/// - leads a process group of its own (`setpgid(0, 0)` in the child): a signal
///   meant for it never hits this process, and `kill(-pgid)` reaches it and
///   every grandchild it starts;
/// - receives SIGKILL from the kernel when this process dies, even by SIGKILL,
///   where no destructor runs (`PR_SET_PDEATHSIG`). "This process" is, for the
///   kernel, the *thread* that spawns the child: spawn from a thread that lives
///   as long as the child should.
///
/// If this process dies between fork and exec, the child was re-parented
/// before it could ask for the signal, so it refuses to start instead.
pub fn own_group_killed_with_parent(command: &mut Command) {
    command.process_group(0);
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and calls only
    // prctl and getppid, both async-signal-safe; it allocates nothing on the
    // success path.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::other("the parent died before exec"));
            }
            Ok(())
        });
    }
}

/// The `<key>:   1234 kB` line of a /proc/PID/status text (`VmRSS`, `VmHWM`),
/// in KiB: how the labs that weigh a process's memory read it.
pub fn status_field_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_leads_its_own_process_group() {
        let mut command = Command::new("sh");
        command.args(["-c", "ps -o pgid= -p $$"]);
        own_group_killed_with_parent(&mut command);
        let output = command.output().expect("sh runs");
        let group: u32 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .expect("ps prints the group");
        let ours = unsafe { libc::getpgrp() } as u32;
        assert_ne!(group, ours, "the child is not in our group");
    }
}
