//! The `memory.high` write bound's watchdog (`memweightd::interrupt`) in a process of its own,
//! where nothing else arms a deadline: it sleeps while nothing is armed, and still wakes for a
//! deadline armed after a long sleep.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use memweightd::interrupt::{Deadline, install};

/// The watchdog thread's voluntary context switches (each sleep it wakes from is one).
fn watchdog_wakeups() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "write-deadline" {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).expect("status");
        return status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("voluntary_ctxt_switches");
    }
    panic!("no write-deadline thread");
}

#[test]
fn regression_the_idle_watchdog_woke_fifty_times_a_second() {
    install().expect("installed");
    // Let the thread start and settle into its wait.
    std::thread::sleep(Duration::from_millis(100));
    let before = watchdog_wakeups();
    std::thread::sleep(Duration::from_millis(1000));
    let idle = watchdog_wakeups() - before;
    assert!(idle <= 2, "woken {idle} times in 1 s with nothing armed");

    // Armed after the long sleep, a deadline still interrupts a blocked call.
    let (mut a, _b) = UnixStream::pair().expect("pair");
    let started = Instant::now();
    let d = Deadline::arm(Duration::from_millis(50)).expect("armed after install");
    let err = a.read(&mut [0u8; 1]).expect_err("nothing was ever written");
    drop(d);
    assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "{err}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(50),
        "not before its deadline: {took:?}"
    );
    assert!(took < Duration::from_secs(5), "interrupted: {took:?}");
}
