//! Bounded shares of tokio's blocking pool, one per kind of blocking work.
//!
//! Two kinds of work block a thread for long and come in numbers no one bounds for us: writes to
//! a cgroup's control files (one job per cgroup; `memory.reclaim` can sit in the kernel's
//! reclaim for seconds) and control clients' credential checks (the group database is NSS:
//! files, but also LDAP or SSSD, which can hang). On one shared pool either kind could take
//! every thread and make the other wait: a thousand stuck writes would keep group members
//! out, a slow directory would hold enforcement back. Each kind gets its own [`BlockingPool`]
//! of bounded size ([`kernel_writes`], [`credentials`]), carved out of the runtime's blocking
//! threads ([`BLOCKING_THREADS`]), with room left for everything else.
//!
//! A job waits (as an async task, holding no thread) until its pool has room; the thread's
//! share is given back when the job's closure returns, whether or not anyone still waits for
//! its result.

use std::sync::{Arc, LazyLock};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// The runtime's blocking threads (`max_blocking_threads` in `main`).
pub const BLOCKING_THREADS: usize = 64;
/// Cgroup control-file writes running at once.
pub const KERNEL_WRITES: usize = 48;
/// Credential checks of control clients running at once.
pub const CREDENTIALS: usize = 4;
const _: () = assert!(KERNEL_WRITES + CREDENTIALS < BLOCKING_THREADS);

/// A bounded share of the blocking pool.
#[derive(Debug)]
pub struct BlockingPool {
    permits: Arc<Semaphore>,
    size: usize,
}

impl BlockingPool {
    /// A pool running at most `size` jobs at once.
    #[must_use]
    pub fn new(size: usize) -> Self {
        BlockingPool {
            permits: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// How many jobs may run at once.
    #[must_use]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Jobs that could start now.
    #[must_use]
    pub fn idle(&self) -> usize {
        self.permits.available_permits()
    }

    /// Runs `job` on a blocking thread once the pool has room. The handle works like
    /// `tokio::task::spawn_blocking`'s: a panic in `job` comes back as the join error.
    /// Dropping or aborting the handle does not stop a job already running (nothing can), and
    /// its room is taken until it returns.
    pub fn spawn<F, R>(&self, job: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let permits = Arc::clone(&self.permits);
        tokio::spawn(async move {
            // The semaphore is never closed: acquiring only waits.
            let permit = permits.acquire_owned().await.ok();
            let run = tokio::task::spawn_blocking(move || {
                let _room = permit;
                job()
            });
            match run.await {
                Ok(r) => r,
                Err(e) => match e.try_into_panic() {
                    Ok(panic) => std::panic::resume_unwind(panic),
                    // Cancelled: the runtime is shutting down and takes this task with it.
                    Err(_) => std::future::pending().await,
                },
            }
        })
    }
}

/// The pool for cgroup control-file writes (`memory.high`, `memory.low`, `memory.reclaim`).
pub fn kernel_writes() -> &'static BlockingPool {
    static POOL: LazyLock<BlockingPool> = LazyLock::new(|| BlockingPool::new(KERNEL_WRITES));
    &POOL
}

/// The pool for control clients' credential checks (the group and user databases).
pub fn credentials() -> &'static BlockingPool {
    static POOL: LazyLock<BlockingPool> = LazyLock::new(|| BlockingPool::new(CREDENTIALS));
    &POOL
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Issue 23: credential checks and kernel writes shared tokio's one blocking pool, so writes
    /// stuck in `memory.reclaim` could hold every thread and keep group members out (and a
    /// hanging group database could hold enforcement back).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn regression_stuck_kernel_writes_leave_room_for_credential_checks() {
        let writes = BlockingPool::new(3);
        let creds = BlockingPool::new(1);
        let (release, stuck) = mpsc::channel::<()>();
        let stuck = Arc::new(std::sync::Mutex::new(stuck));
        // Twice as many writes as the pool runs, all stuck in the "kernel".
        let jobs: Vec<JoinHandle<()>> = (0..6)
            .map(|_| {
                let stuck = Arc::clone(&stuck);
                writes.spawn(move || {
                    let _ = stuck
                        .lock()
                        .map(|rx| rx.recv_timeout(Duration::from_secs(30)));
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(writes.idle(), 0);
        let check = creds.spawn(|| 42);
        let answer = tokio::time::timeout(Duration::from_secs(2), check)
            .await
            .expect("the credential check is not queued behind the writes")
            .expect("no panic");
        assert_eq!(answer, 42);
        for _ in 0..6 {
            let _ = release.send(());
        }
        for job in jobs {
            job.await.expect("write job");
        }
        assert_eq!(writes.idle(), writes.size());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pool_runs_at_most_its_size_and_panics_come_back() {
        let pool = BlockingPool::new(2);
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let jobs: Vec<JoinHandle<()>> = (0..8)
            .map(|_| {
                let (running, most) = (Arc::clone(&running), Arc::clone(&most));
                pool.spawn(move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = running.fetch_add(1, SeqCst) + 1;
                    most.fetch_max(now, SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    running.fetch_sub(1, SeqCst);
                })
            })
            .collect();
        for job in jobs {
            job.await.expect("job");
        }
        assert!(most.load(std::sync::atomic::Ordering::SeqCst) <= 2);
        let panicked = pool.spawn(|| -> u8 { panic!("a job's panic") }).await;
        assert!(panicked.is_err_and(|e| e.is_panic()));
        assert_eq!(pool.idle(), 2);
    }
}
