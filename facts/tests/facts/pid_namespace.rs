//! The kernel's rule for PID 1 of a PID namespace (a container's first
//! process): a signal whose action is the default is dropped, unless it is
//! SIGKILL or SIGSTOP sent from an ancestor namespace. `sleep` installs no
//! handler, so it shows the rule: as an ordinary process SIGTERM ends it, as
//! PID 1 it does not.
//!
//! The namespace is made in the forked child before `exec`: as root with
//! `CLONE_NEWPID`, otherwise inside a new user namespace (which a
//! multi-threaded test process could not enter itself). The child forks once
//! more, so that `sleep` is the namespace's first process, and stays as its
//! parent, exiting as `sleep` did.

use std::{
    io::Read,
    os::{fd::FromRawFd, unix::process::CommandExt, unix::process::ExitStatusExt},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// `sleep 30` and the pid it has out here; killed (both processes) on drop.
struct Sleeper {
    parent: Child,
    sleep_pid: i32,
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        // Once the parent is reaped, `sleep` is gone and its pid may be
        // another process's: only signal it while the parent runs.
        if matches!(self.parent.try_wait(), Ok(None)) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(self.sleep_pid, libc::SIGKILL);
            }
        }
        let _ = self.parent.kill();
        let _ = self.parent.wait();
    }
}

fn sleeper(as_pid_one: bool) -> Sleeper {
    if !as_pid_one {
        let parent = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts");
        let sleep_pid = parent.id() as i32;
        return Sleeper { parent, sleep_pid };
    }
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "a pipe");
    let (read_fd, write_fd) = (fds[0], fds[1]);
    let mut command = Command::new("sleep");
    command.arg("30").stdin(Stdio::null());
    // SAFETY: between fork and exec only async-signal-safe calls: unshare,
    // fork, write, close, waitpid, _exit.
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWPID) != 0
                && libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::fork();
            if pid < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if pid > 0 {
                // The parent in the old namespace: tell the test the pid,
                // then end as the namespace's init ends. It never execs, so
                // it closes every other descriptor first: std's spawn waits
                // for its close-on-exec error pipe to close.
                libc::write(write_fd, (&raw const pid).cast(), size_of::<i32>());
                for fd in 3..1024 {
                    libc::close(fd);
                }
                let mut status = 0;
                libc::waitpid(pid, &mut status, 0);
                let code = if libc::WIFSIGNALED(status) {
                    128 + libc::WTERMSIG(status)
                } else {
                    libc::WEXITSTATUS(status)
                };
                libc::_exit(code);
            }
            Ok(())
        });
    }
    let parent = command
        .spawn()
        .expect("the kernel refused a PID namespace (as root) and a user namespace");
    // SAFETY: our end of the pipe; the child's copy closes with it.
    unsafe {
        libc::close(write_fd);
    }
    // SAFETY: read_fd is ours alone; the File closes it.
    let mut reader = unsafe { std::fs::File::from_raw_fd(read_fd) };
    let mut pid = [0u8; 4];
    reader.read_exact(&mut pid).expect("the namespace's pid");
    Sleeper {
        parent,
        sleep_pid: i32::from_ne_bytes(pid),
    }
}

/// Its pid inside its own namespace (the last field of `NSpid`), and whether
/// it is still running (not a zombie).
fn inside_pid_and_running(pid: i32) -> (Option<i32>, bool) {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (None, false);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_string()
    };
    let inside = field("NSpid:")
        .split_whitespace()
        .last()
        .and_then(|text| text.parse().ok());
    (inside, !field("State:").starts_with('Z'))
}

/// Waits (bounded) for the process that started `sleep` to end; its code as
/// a shell reports it.
fn ended_within(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(
                status
                    .code()
                    .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[test]
fn a_pid_namespace_init_ignores_sigterm_without_a_handler() {
    // An ordinary process: SIGTERM's default action ends it.
    let mut ordinary = sleeper(false);
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(ordinary.sleep_pid, libc::SIGTERM) };
    assert_eq!(
        ended_within(&mut ordinary.parent, Duration::from_secs(5)),
        Some(143),
        "sleep as an ordinary process dies of SIGTERM"
    );

    // PID 1 of a new namespace, signalled from out here (as a container
    // runtime signals it): SIGTERM is dropped, SIGKILL is not.
    let mut init = sleeper(true);
    let (inside, running) = inside_pid_and_running(init.sleep_pid);
    assert_eq!(inside, Some(1), "sleep is PID 1 of its namespace");
    assert!(running);
    // SAFETY: as above.
    unsafe { libc::kill(init.sleep_pid, libc::SIGTERM) };
    assert_eq!(
        ended_within(&mut init.parent, Duration::from_millis(500)),
        None,
        "PID 1 without a handler survived SIGTERM"
    );
    assert!(inside_pid_and_running(init.sleep_pid).1);
    // SAFETY: as above.
    unsafe { libc::kill(init.sleep_pid, libc::SIGKILL) };
    assert_eq!(
        ended_within(&mut init.parent, Duration::from_secs(5)),
        Some(137),
        "SIGKILL from an ancestor namespace is delivered"
    );
}
