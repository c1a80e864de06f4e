//! A lab's place in a batch of labs that share the machine, and the parts of
//! a lab that must not share it.
//!
//! `cargo xtask book` runs the labs that mostly wait on timers side by side,
//! as one batch, and gives each of them the same folder in [`ENV`]. A lab
//! whose last parts measure something another lab's load would blur (the
//! overload lab's bulkheads time calls to the millisecond; the DNS lab times
//! lookups of under a millisecond) still runs in the batch: it runs its
//! waiting parts first, beside the other labs, then calls [`alone`], which
//! returns once every other lab of the batch has ended or is itself waiting
//! to be alone, and keeps the rest of the batch waiting until it exits.
//!
//! Underneath are two advisory file locks (`flock(2)`, through
//! `File::lock`):
//! - `machine.lock`: every lab of the batch holds it shared while it runs,
//!   and one lab at a time holds it exclusively while it runs alone;
//! - `turnstile.lock`: held exclusively by a lab while it waits to be alone,
//!   so that no lab joins the batch in the meantime (the waiting lab is not
//!   starved), and for a moment by each lab as it joins.
//!
//! A lab never waits for the turnstile while it holds the machine, so two
//! labs cannot wait for each other. The kernel drops a process's locks when
//! it exits, so a lab that crashes or is killed leaves no lock behind.
//!
//! A lab run by itself (`cargo run -p lab-overload`, a test, `cargo xtask
//! book`'s labs that run alone) has no [`ENV`], and [`alone`] returns at
//! once: it is alone already.

#[cfg(feature = "runtime")]
use std::time::{Duration, Instant};
use std::{
    fs::{File, OpenOptions},
    path::Path,
    sync::Mutex,
};

use anyhow::{Context, Result};

/// The environment variable that names the batch's folder of lock files.
pub const ENV: &str = "LAB_KIT_BATCH";

/// This process's place in a batch: its two lock files, and whether it runs
/// alone yet.
#[derive(Debug)]
pub struct Place {
    machine: File,
    turnstile: File,
    alone: bool,
}

impl Place {
    /// Joins the batch whose lock files are in `folder` (created if missing):
    /// returns once no lab of it runs alone, holding the machine shared.
    pub fn join(folder: &Path) -> Result<Place> {
        let open = |name: &str| {
            let path = folder.join(name);
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .with_context(|| format!("opening the batch's lock {}", path.display()))
        };
        let place = Place {
            machine: open("machine.lock")?,
            turnstile: open("turnstile.lock")?,
            alone: false,
        };
        place
            .turnstile
            .lock()
            .context("waiting at the batch's turnstile")?;
        place
            .machine
            .lock_shared()
            .context("taking the machine shared")?;
        place.turnstile.unlock().context("leaving the turnstile")?;
        Ok(place)
    }

    /// Waits until every other lab of the batch has ended or waits to be
    /// alone, then holds the machine exclusively until this place is dropped
    /// (the process exits). Calling it again changes nothing.
    pub fn alone(&mut self) -> Result<()> {
        if self.alone {
            return Ok(());
        }
        // Let go of the machine before queueing at the turnstile: a lab that
        // held it there would wait for a lab that waits for it.
        self.machine.unlock().context("letting go of the machine")?;
        self.turnstile
            .lock()
            .context("waiting at the batch's turnstile")?;
        self.machine.lock().context("waiting for the machine")?;
        self.turnstile.unlock().context("leaving the turnstile")?;
        self.alone = true;
        Ok(())
    }
}

/// This process's place, when it runs in a batch.
static PLACE: Mutex<Option<Place>> = Mutex::new(None);

/// How long [`alone`] has waited: the time it ended its waits, and when its
/// current wait began, if it is waiting.
#[cfg(feature = "runtime")]
static WAITING: Mutex<(Duration, Option<Instant>)> = Mutex::new((Duration::ZERO, None));

/// How long this lab has waited for the rest of its batch so far: its
/// budget is for its own work, so `run_lab` adds this to it (and the xtask's
/// kill timer allows for the other labs of the batch).
#[cfg(feature = "runtime")]
pub fn waited() -> Duration {
    let (done, since) = *WAITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    done + since.map_or(Duration::ZERO, |since| since.elapsed())
}

/// Joins the batch [`ENV`] names, if it names one; `run_lab` calls it before
/// the lab starts.
pub fn join_from_env() -> Result<()> {
    let Some(folder) = std::env::var_os(ENV) else {
        return Ok(());
    };
    let place = Place::join(Path::new(&folder))?;
    *PLACE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(place);
    Ok(())
}

/// Runs the rest of `lab` (its slug) alone: returns once no other lab of its
/// batch runs (at once when it runs in no batch), with how long it waited,
/// which a wait of a tenth of a second or more also says on stderr. Call it
/// when the lab's other work has ended: the lab's own tasks still running
/// would share the machine with its alone part.
#[cfg(feature = "runtime")]
pub async fn alone(lab: &str) -> Result<Duration> {
    let started = Instant::now();
    let waiting = || {
        WAITING
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    waiting().1 = Some(started);
    let outcome = tokio::task::spawn_blocking(|| {
        let mut place = PLACE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match place.as_mut() {
            Some(place) => place.alone(),
            None => Ok(()),
        }
    })
    .await;
    let waited = started.elapsed();
    let mut clock = waiting();
    *clock = (clock.0 + waited, None);
    drop(clock);
    outcome.context("the task waiting to run alone")??;
    if waited >= Duration::from_millis(100) {
        eprintln!(
            "{lab}: waited {:.1}s for the other labs of the batch, to run the rest alone",
            waited.as_secs_f64()
        );
    }
    Ok(waited)
}

#[cfg(test)]
mod tests {
    // The tests time the locks themselves: `Duration` here whatever the
    // features (the module's own import is the runtime feature's).
    use std::{sync::mpsc, thread, time::Duration};

    use super::*;

    const NOT_YET: Duration = Duration::from_millis(300);
    const SOON: Duration = Duration::from_secs(10);

    /// A lab on a thread of its own: it joins the batch in `folder` (and,
    /// with `alone`, waits to run alone), then sends `name`.
    fn lab(
        name: &'static str,
        done: &mpsc::Sender<&'static str>,
        folder: &Path,
        alone: bool,
    ) -> thread::JoinHandle<Place> {
        let (done, folder) = (done.clone(), folder.to_path_buf());
        thread::spawn(move || {
            let mut place = Place::join(&folder).unwrap();
            if alone {
                place.alone().unwrap();
            }
            done.send(name).unwrap();
            place
        })
    }

    /// Nothing arrives on `finished` for a while.
    fn nothing_yet(finished: &mpsc::Receiver<&'static str>, what: &str) {
        assert!(finished.recv_timeout(NOT_YET).is_err(), "{what}");
    }

    #[test]
    fn labs_share_the_machine_and_one_alone_waits_for_the_others_to_end() {
        let folder = tempfile::tempdir().unwrap();
        let first = Place::join(folder.path()).unwrap();
        let second = Place::join(folder.path()).unwrap();
        let (done, finished) = mpsc::channel();
        let waiting = lab("alone", &done, folder.path(), true);
        nothing_yet(&finished, "alone beside two labs");
        drop(first);
        nothing_yet(&finished, "alone beside one lab");
        drop(second);
        assert_eq!(finished.recv_timeout(SOON), Ok("alone"));
        let alone = waiting.join().unwrap();
        // A lab that joins now waits until the lone lab exits.
        let late = lab("joined", &done, folder.path(), false);
        nothing_yet(&finished, "joined beside a lone lab");
        drop(alone);
        assert_eq!(finished.recv_timeout(SOON), Ok("joined"));
        late.join().unwrap();
    }

    #[test]
    fn a_lab_waiting_to_be_alone_is_not_overtaken_by_labs_that_join_later() {
        let folder = tempfile::tempdir().unwrap();
        let running = Place::join(folder.path()).unwrap();
        let (done, finished) = mpsc::channel();
        let waiting = lab("alone", &done, folder.path(), true);
        thread::sleep(NOT_YET);
        let late = lab("joined", &done, folder.path(), false);
        nothing_yet(&finished, "someone passed the running lab");
        drop(running);
        assert_eq!(finished.recv_timeout(SOON), Ok("alone"));
        nothing_yet(&finished, "joined beside a lone lab");
        drop(waiting.join().unwrap());
        assert_eq!(finished.recv_timeout(SOON), Ok("joined"));
        late.join().unwrap();
    }

    /// A process that holds `machine.lock` in `folder` shared, as a lab of
    /// the batch does, and sleeps until it is killed; returns once it holds
    /// it. A forked child, so that the lock dies with a process, not a file.
    fn process_holding_the_machine(folder: &Path) -> i32 {
        use std::{ffi::CString, os::unix::ffi::OsStrExt};
        let path = CString::new(folder.join("machine.lock").as_os_str().as_bytes()).unwrap();
        let mut pipe = [0; 2];
        // SAFETY: pipe(2) fills the two descriptors it is given.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child only makes system calls (no allocation, no
        // lock), which is what a child of a threaded process may do.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            unsafe {
                // Dies with the test's thread, should the test fail first.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                let fd = libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
                libc::flock(fd, libc::LOCK_SH);
                libc::write(pipe[1], [1u8].as_ptr().cast(), 1);
                loop {
                    libc::pause();
                }
            }
        }
        let mut byte = [0u8];
        // SAFETY: reads one byte into a buffer of one, then closes both ends.
        unsafe {
            assert_eq!(libc::read(pipe[0], byte.as_mut_ptr().cast(), 1), 1);
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        pid
    }

    #[test]
    fn a_lab_killed_while_it_runs_leaves_no_lock_behind() {
        let folder = tempfile::tempdir().unwrap();
        let child = process_holding_the_machine(folder.path());
        let (done, finished) = mpsc::channel();
        let waiting = lab("alone", &done, folder.path(), true);
        nothing_yet(&finished, "alone beside a running process");
        crate::process::signal(child, libc::SIGKILL).unwrap();
        // SAFETY: reaps the child this test forked.
        unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
        assert_eq!(finished.recv_timeout(SOON), Ok("alone"));
        waiting.join().unwrap();
    }

    #[test]
    fn two_labs_that_want_to_be_alone_take_turns() {
        let folder = tempfile::tempdir().unwrap();
        let (done, finished) = mpsc::channel();
        let mut labs = vec![
            lab("one", &done, folder.path(), true),
            lab("two", &done, folder.path(), true),
        ];
        let first = finished.recv_timeout(SOON).unwrap();
        nothing_yet(&finished, "two labs alone at once");
        drop(
            labs.remove(if first == "one" { 0 } else { 1 })
                .join()
                .unwrap(),
        );
        assert!(finished.recv_timeout(SOON).is_ok());
        labs.remove(0).join().unwrap();
    }
}
