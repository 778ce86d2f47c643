//! A time bound on a `memory.high` write: the kernel sets the new limit at once, then reclaims
//! in the writing thread until the cgroup's usage is under it, and stops only when it is, when
//! its reclaim finds nothing sixteen times running, or when a signal is pending. A cgroup that
//! refaults as fast as that reclaim keeps the writer there: on 6.1 one such write held a write
//! job for 13 s, and with it every later write and reclaim pass of that cgroup (ci-converge,
//! 2026-12-01: the weight-2 toucher 5-20 % over its share while each tick found its job still
//! running). Kernels with the 2025 patch "memcg: introduce non-blocking limit setting option"
//! honour `O_NONBLOCK` instead, which the write also passes.
//!
//! A [`Deadline`] armed around the write has one watchdog thread send the writer `SIGURG`
//! once the deadline has passed; the handler [`install`] puts in place does nothing, and the
//! kernel's loop sees the pending signal and returns the write as done. The limit stays set,
//! and the cgroup's own allocations above it are throttled by the kernel as usual.
//!
//! With `crate::peer`'s `getsockopt` and `crate::resident`'s `madvise`, the daemon's only
//! unsafe code: `sigaction` (the handler is empty, so async-signal-safe).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::pthread::{Pthread, pthread_kill, pthread_self};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// How long a `memory.high` write may reclaim in the writer before it is interrupted: a
/// fifth of the default tick, so that a tick's job ends before the next tick decides again.
pub const HIGH_WRITE_BUDGET: Duration = Duration::from_millis(200);

/// The signal sent; its default action is to ignore it, so one that arrives before
/// [`install`] (or in `memweightd --restore`) is dropped by the kernel and changes nothing.
const SIGNAL: Signal = Signal::SIGURG;

/// How often a thread still in its write after the deadline is signalled again: a signal
/// that arrived before the write began (in its `open`) is gone when the write's loop starts.
const AGAIN_EVERY: Duration = Duration::from_millis(100);

/// Threads in a bounded write: id → (thread, when it is signalled next).
type Armed = BTreeMap<u64, (Pthread, Instant)>;

/// The threads in a bounded write, and the watchdog's wake-up when one is armed.
struct Watch {
    armed: Mutex<Armed>,
    woken: Condvar,
}

impl Watch {
    fn armed(&self) -> MutexGuard<'_, Armed> {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

static WATCH: OnceLock<Watch> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(0);

extern "C" fn nothing(_: libc::c_int) {}

/// Installs the empty handler and starts the watchdog thread; idempotent. Without it,
/// [`Deadline::arm`] arms nothing and writes are unbounded.
///
/// # Errors
///
/// The `sigaction` or thread-spawn error.
pub fn install() -> Result<(), String> {
    if WATCH.get().is_some() {
        return Ok(());
    }
    // No SA_RESTART: a system call the signal interrupts returns (`EINTR` where it has not
    // done anything); std's file writes retry on `EINTR`.
    let action = SigAction::new(
        SigHandler::Handler(nothing),
        SaFlags::empty(),
        SigSet::empty(),
    );
    // SAFETY: the handler does nothing, which is async-signal-safe, and SIGURG is not used
    // by anything else in the process (tokio's signal handling registers SIGTERM/SIGHUP).
    unsafe { sigaction(SIGNAL, &action) }.map_err(|e| format!("sigaction(SIGURG): {e}"))?;
    let watch = Watch {
        armed: Mutex::new(BTreeMap::new()),
        woken: Condvar::new(),
    };
    if WATCH.set(watch).is_err() {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("write-deadline".into())
        .spawn(watch_deadlines)
        .map(drop)
        .map_err(|e| format!("watchdog thread: {e}"))
}

/// The watchdog: asleep while nothing is armed (an idle daemon is not woken for it), else
/// until the nearest deadline; signals each armed thread once its deadline has passed, and
/// again every [`AGAIN_EVERY`] while it stays armed.
fn watch_deadlines() {
    let Some(watch) = WATCH.get() else {
        return;
    };
    let mut armed = watch.armed();
    loop {
        let now = Instant::now();
        // Under the lock an entry's thread is alive: it removes its entry (under the same lock)
        // before it does anything else.
        for (thread, next) in armed.values_mut() {
            if now >= *next {
                *next = now + AGAIN_EVERY;
                // A thread that left the write in the meantime gets an empty handler's call.
                let _ = pthread_kill(*thread, SIGNAL);
            }
        }
        armed = match armed.values().map(|&(_, next)| next).min() {
            None => watch
                .woken
                .wait(armed)
                .unwrap_or_else(PoisonError::into_inner),
            Some(next) => {
                watch
                    .woken
                    .wait_timeout(armed, next.saturating_duration_since(now))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
    }
}

/// A write in this thread bounded in time: the thread is signalled once `after` has passed,
/// until the deadline is dropped.
#[must_use = "the bound lasts while the deadline lives"]
#[derive(Debug)]
pub struct Deadline {
    id: u64,
}

impl Deadline {
    /// Arms a deadline for the calling thread (`None` before [`install`]).
    pub fn arm(after: Duration) -> Option<Self> {
        let watch = WATCH.get()?;
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        watch
            .armed()
            .insert(id, (pthread_self(), Instant::now() + after));
        watch.woken.notify_one();
        Some(Self { id })
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if let Some(watch) = WATCH.get() {
            watch.armed().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// A read that would block for ever returns once the deadline has passed; one that ends
    /// before it is not touched.
    #[test]
    fn a_blocked_call_is_interrupted_at_its_deadline() {
        install().expect("installed");
        let (mut a, _b) = UnixStream::pair().expect("pair");
        let started = Instant::now();
        let d = Deadline::arm(Duration::from_millis(50)).expect("armed after install");
        let mut buf = [0u8; 1];
        let err = a.read(&mut buf).expect_err("nothing was ever written");
        drop(d);
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{err}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(50),
            "not before the deadline: {took:?}"
        );
        assert!(took < Duration::from_secs(5), "interrupted: {took:?}");

        // A deadline dropped in time sends nothing: a later blocked read times out.
        let d = Deadline::arm(Duration::from_millis(50)).expect("armed");
        drop(d);
        a.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        let err = a.read(&mut buf).expect_err("nothing was ever written");
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock, "{err}");
    }
}
