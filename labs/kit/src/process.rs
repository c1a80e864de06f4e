//! How every child process of the project is started, signalled and ended,
//! labs' and xtask's alike: in its own process group, killed by the kernel
//! when the process that started it dies, and ended with its whole group.
//! This is the one place that calls `kill(2)`. [`crate::child::ChildGuard`]
//! adds the kill-on-drop on top; the xtask, which has no async runtime, uses
//! this alone.

use std::{
    io,
    os::unix::process::CommandExt,
    process::{Child, Command, ExitStatus},
    thread,
    time::{Duration, Instant},
};

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

/// Sends `signal` to process `pid` alone. A pid of 0 or below would name a
/// group or every process (`kill(2)`), so it is refused.
pub fn signal(pid: i32, signal: i32) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::other(format!("no process has pid {pid}")));
    }
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// SIGKILL to every process of group `group` (the pid of the child that
/// leads it, from [`own_group_killed_with_parent`]); nothing for a group that
/// is gone. It calls `kill(2)` alone, so a signal handler may call it. A
/// group of 0 or below (this process's own, or every process) is refused.
pub fn kill_group(group: i32) {
    if group > 0 {
        // SAFETY: kill(2) is async-signal-safe and has no memory-safety
        // preconditions; a negative pid names the process group.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

/// True while process `pid` exists (a zombie counts): signal 0 asks.
pub fn exists(pid: i32) -> bool {
    // SAFETY: signal 0 only checks; kill(2) has no memory-safety preconditions.
    pid > 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// True while any process of group `group` exists.
pub fn group_exists(group: i32) -> bool {
    // SAFETY: as in `exists`, for a group.
    group > 0 && unsafe { libc::kill(-group, 0) } == 0
}

/// Waits for `child` (started with [`own_group_killed_with_parent`]) for at
/// most `limit`, looking every `poll`; past it, kills its whole group, reaps
/// the child and returns `None`.
pub fn wait_or_kill_group(
    child: &mut Child,
    limit: Duration,
    poll: Duration,
) -> io::Result<Option<ExitStatus>> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if started.elapsed() > limit {
            kill_group(child.id() as i32);
            let _ = child.wait();
            return Ok(None);
        }
        thread::sleep(poll);
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

    #[test]
    fn a_child_past_its_limit_is_killed_with_its_group() {
        // The shell leads the group; its `sleep` is a grandchild.
        let mut command = Command::new("sh");
        command.args(["-c", "sleep 30 & echo $!; wait"]);
        command.stdout(std::process::Stdio::piped());
        own_group_killed_with_parent(&mut command);
        let mut child = command.spawn().expect("sh starts");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("the sleep's pid");
        let grandchild: i32 = line.trim().parse().expect("a pid");
        let group = child.id() as i32;
        assert!(group_exists(group) && exists(grandchild));
        let ended = wait_or_kill_group(
            &mut child,
            Duration::from_millis(200),
            Duration::from_millis(10),
        )
        .expect("waiting works");
        assert!(ended.is_none(), "sh does not end by itself");
        // The grandchild was killed with the group: gone, or a zombie until
        // its new parent (init, or a subreaper) reaps it.
        let running = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.to_owned()))
                .is_some_and(|rest| rest.split_whitespace().next() != Some("Z"))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while running(grandchild) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!running(grandchild), "the sleep outlived its group's kill");
        let mut quick = Command::new("true");
        own_group_killed_with_parent(&mut quick);
        let mut quick = quick.spawn().expect("true starts");
        let status = wait_or_kill_group(
            &mut quick,
            Duration::from_secs(5),
            Duration::from_millis(10),
        )
        .expect("waiting works");
        assert!(status.is_some_and(|status| status.success()));
    }

    #[test]
    fn refuses_what_would_signal_a_group_or_everyone() {
        assert!(signal(0, 0).is_err());
        assert!(signal(-1, 0).is_err());
        assert!(!exists(0) && !group_exists(0) && !group_exists(-1));
        // Would have been this process's own group: nothing happens.
        kill_group(0);
        assert!(signal(std::process::id() as i32, 0).is_ok());
    }
}
