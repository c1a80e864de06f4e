//! The two small processes the PID 1 part puts in front of the server:
//! `__pid1`, which starts a command as PID 1 of a new PID namespace (what a
//! container runtime does), and `__init`, a tini-style init that forwards
//! signals to its one child and reaps every process that ends.
//!
//! Both are plain blocking code, run before any runtime or thread exists:
//! `unshare(CLONE_NEWUSER)` refuses a process with more than one thread.

use std::{
    io::{self, Write},
    os::unix::process::CommandExt,
    process::Command,
};

use anyhow::{Context, Result, bail};
use lab_kit::child::Ended;

/// The exit code `__pid1` uses when the kernel refuses the namespace (the
/// lab then skips the part with one line).
pub const NAMESPACE_REFUSED: i32 = 3;

/// Enters a new PID namespace for this process's children: as root with
/// `CLONE_NEWPID` alone; otherwise inside a new user namespace, mapping this
/// user to itself. Returns which one it used.
fn new_pid_namespace() -> Result<&'static str> {
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
        return Ok("pid");
    }
    let as_root = io::Error::last_os_error();
    // SAFETY: as above; getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        let as_user = io::Error::last_os_error();
        bail!("the kernel refused a PID namespace ({as_root}) and a user namespace ({as_user})");
    }
    // Without a mapping the child would run as the overflow user, and could
    // not write its own database.
    std::fs::write("/proc/self/setgroups", "deny").context("writing setgroups")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).context("mapping the uid")?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).context("mapping the gid")?;
    Ok("user+pid")
}

/// `lab-shutdown-drain __pid1 COMMAND...`: starts COMMAND as PID 1 of a new
/// PID namespace, prints `<its pid out here> <namespace>` on stdout (the
/// pid the orchestrator signals, as a runtime signals a container's init),
/// waits for it and exits with its code as a shell reports it (128 + the
/// signal that ended it). Exits 3 with one line when the namespace is refused.
pub fn pid1_main(args: &[String]) -> Result<i32> {
    let Some((program, rest)) = args.split_first() else {
        bail!("usage: __pid1 COMMAND [ARG...]");
    };
    let namespace = match new_pid_namespace() {
        Ok(namespace) => namespace,
        Err(error) => {
            eprintln!("pid namespace: {error:#}");
            return Ok(NAMESPACE_REFUSED);
        }
    };
    let mut command = Command::new(program);
    command.args(rest);
    // SAFETY: prctl is async-signal-safe; the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            // If this helper dies, its namespace's init goes with it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {program:?} as PID 1"))?;
    let mut stdout = io::stdout();
    writeln!(stdout, "{} {namespace}", child.id()).context("printing the pid")?;
    stdout.flush().context("printing the pid")?;
    let status = child.wait().context("waiting for PID 1")?;
    Ok(Ended::from_status(status).shell_code())
}

// ANCHOR: init
/// `lab-shutdown-drain __init COMMAND...`: what tini does, in short. Blocks
/// the signals it forwards (a blocked signal is queued, never dropped, even
/// for a PID 1 without handlers), starts COMMAND with them unblocked, then
/// waits: a forwarded signal goes to the child; SIGCHLD reaps every process
/// that ended (orphans are re-parented to PID 1); when the child itself has
/// ended, exits with its code (128 + signal for a signalled child).
pub fn init_main(args: &[String]) -> Result<i32> {
    let Some((program, rest)) = args.split_first() else {
        bail!("usage: __init COMMAND [ARG...]");
    };
    const FORWARDED: [i32; 6] = [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ];
    // SAFETY: a zeroed sigset_t is valid storage; sigemptyset and sigaddset
    // initialise it; sigprocmask changes this (still single) thread's mask.
    let mut waited: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut waited);
        for signal in FORWARDED.into_iter().chain([libc::SIGCHLD]) {
            libc::sigaddset(&mut waited, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &waited, std::ptr::null_mut());
    }
    // The child must not inherit the blocked mask (std's spawn keeps it):
    // a server with TERM blocked would never see the SIGTERM forwarded to it.
    let mut command = Command::new(program);
    command.args(rest);
    // SAFETY: sigprocmask is async-signal-safe; `waited` is copied in.
    unsafe {
        command.pre_exec(move || {
            libc::sigprocmask(libc::SIG_UNBLOCK, &waited, std::ptr::null_mut());
            Ok(())
        });
    }
    let child = command
        .spawn()
        .with_context(|| format!("starting {program:?} under the init"))?;
    let child_pid = i32::try_from(child.id()).context("a pid that does not fit in i32")?;
    loop {
        // SAFETY: `waited` is an initialised set; a null info is allowed.
        let signal = unsafe { libc::sigwaitinfo(&waited, std::ptr::null_mut()) };
        if signal == libc::SIGCHLD {
            // Reap everything that ended; stop when our child is among them.
            loop {
                let mut status = 0;
                // SAFETY: waitpid writes the status into our variable.
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid <= 0 {
                    break;
                }
                if pid == child_pid {
                    let ended = if libc::WIFSIGNALED(status) {
                        Ended::Signal(libc::WTERMSIG(status))
                    } else {
                        Ended::Code(libc::WEXITSTATUS(status))
                    };
                    return Ok(ended.shell_code());
                }
            }
        } else if signal > 0 {
            // Forwarded: the child is not reaped yet (that happens above), so
            // its pid is still its own. A child already gone is not an error.
            let _ = lab_kit::process::signal(child_pid, signal);
        }
    }
}
// ANCHOR_END: init
