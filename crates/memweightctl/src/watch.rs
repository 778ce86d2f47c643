//! `status --watch`: draw, wait, draw again, until Ctrl-C, a closed pipe or `--count`.
//!
//! SIGINT, SIGTERM and SIGHUP are blocked while watching and read from a `signalfd`, which the
//! wait between frames polls: Ctrl-C ends the watch at once, cleanly (exit 0, nothing on
//! stderr), and never halfway through a frame. A reader that goes away (`| head`) ends it the
//! same way. The pure part, how a frame is laid out, is [`frame`].

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::client::{Pause, Pauser};
use crate::{Failure, Written, write_out};

/// Clears a terminal and puts the cursor home, so that each frame replaces the last.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// The stop signals, blocked and readable from a descriptor for as long as this lives.
pub(crate) struct Interrupts {
    fd: SignalFd,
}

impl Interrupts {
    /// Blocks SIGINT, SIGTERM and SIGHUP for this (single-threaded) process and opens the
    /// descriptor they are read from.
    pub fn catch() -> Result<Self, Failure> {
        let mut set = SigSet::empty();
        for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            set.add(s);
        }
        let fail = |e: Errno| Failure::other(format_args!("cannot watch for Ctrl-C: {e}"));
        set.thread_block().map_err(fail)?;
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .map_err(fail)?;
        Ok(Interrupts { fd })
    }

    /// Waits `d`, or less if a stop signal arrives.
    pub fn pause(&self, d: Duration) -> Pause {
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, timeout) {
                Ok(0) if left.is_zero() => return Pause::Slept,
                Ok(0) | Err(Errno::EINTR) => {}
                // A readable descriptor: a stop signal is pending. Any other poll error is
                // read as one too: the watch ends rather than spinning.
                Ok(_) | Err(_) => return Pause::Interrupted,
            }
            if Instant::now() >= until {
                return Pause::Slept;
            }
        }
    }
}

/// What one frame prints: on a terminal the screen is cleared and a header says how to stop;
/// elsewhere (a pipe, a file) frames follow each other, separated by a blank line. JSON is
/// never decorated: the frames are a stream of JSON documents.
#[must_use]
pub(crate) fn frame(text: &str, terminal: bool, json: bool, n: u64, every: Duration) -> String {
    if json {
        return text.to_owned();
    }
    if terminal {
        return format!(
            "{CLEAR}every {} s: memweightctl status (Ctrl-C to stop)\n\n{text}",
            every.as_secs_f64()
        );
    }
    if n == 0 {
        text.to_owned()
    } else {
        format!("\n{text}")
    }
}

/// Draws `draw`'s text every `every` (`count` times at most) until Ctrl-C or a closed pipe.
/// `draw` gets the pause to use while it waits for a daemon that is not ready.
pub(crate) fn run(
    every: Duration,
    count: Option<u64>,
    terminal: bool,
    json: bool,
    draw: &mut dyn FnMut(&mut Pauser<'_>) -> Result<String, Failure>,
) -> Result<(), Failure> {
    let interrupts = Interrupts::catch()?;
    let mut n: u64 = 0;
    loop {
        let mut stopped = false;
        let text = draw(&mut |d| {
            let p = interrupts.pause(d);
            stopped |= p == Pause::Interrupted;
            p
        });
        let text = match text {
            Ok(t) => t,
            Err(_) if stopped => return Ok(()),
            Err(f) => return Err(f),
        };
        if write_out(&frame(&text, terminal, json, n, every))? == Written::Closed {
            return Ok(());
        }
        n += 1;
        if count.is_some_and(|c| n >= c) || interrupts.pause(every) == Pause::Interrupted {
            return Ok(());
        }
    }
}

/// `--interval`: seconds (`2`, `0.5`) or with a unit (`2s`, `500ms`), 0.2 s to 1 hour.
pub(crate) fn parse_interval(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 0.001)
    } else if let Some(s) = t.strip_suffix('s') {
        (s, 1.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>().map(|v| v * scale) {
        Ok(s) if (0.2..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "expected seconds from 0.2 to 3600 (`2`, `0.5`, `500ms`), got {text:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval(" 10s "), Ok(Duration::from_secs(10)));
        for bad in [
            "0", "0.1", "100ms", "3601", "-1", "soon", "", "NaN", "inf", "1e400",
        ] {
            let e = parse_interval(bad).expect_err(bad);
            assert!(e.contains("0.2 to 3600"), "{bad}: {e}");
        }
    }

    #[test]
    fn frames_clear_a_terminal_and_follow_each_other_elsewhere() {
        let every = Duration::from_secs(2);
        let t = frame("pool: x\n", true, false, 3, every);
        assert!(t.starts_with(CLEAR), "{t:?}");
        assert!(
            t.contains("every 2 s: memweightctl status (Ctrl-C to stop)\n\npool: x\n"),
            "{t:?}"
        );
        assert_eq!(frame("pool: x\n", false, false, 0, every), "pool: x\n");
        assert_eq!(frame("pool: x\n", false, false, 1, every), "\npool: x\n");
        assert_eq!(frame("{}\n", true, true, 5, every), "{}\n");
    }
}
