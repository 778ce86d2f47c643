//! The front desk between the control socket and the control loop: `status` never waits for
//! a tick.
//!
//! The loop handles commands between ticks only, and a first tick that adopts thousands of
//! cgroups can take seconds. `status` needs nothing but the last tick's report, which the loop
//! publishes after every tick (the same [`Published`] `/metrics` reads), so the desk answers it
//! from there at once; `version` needs no state at all and is answered here too. Every other
//! command (`set`, `unset`, `get`, `explain`, `reload`) reads or changes the
//! [`crate::controller::Controller`] and goes on to the loop, which stays the one owner of
//! state. Before the first report exists the desk answers `status` itself with
//! "not ready", so that a first tick adopting thousands of cgroups never holds a client.

use memweight_proto::ctl::{Command, ErrorReply, Outcome, Reply, Status};
use tokio::sync::mpsc;

use crate::metrics::{Published, PublishedRx};
use crate::server::Call;

/// Serves calls from the socket until it closes: `status` from the newest snapshot, the rest
/// forwarded to the loop.
pub async fn serve(
    mut calls: mpsc::Receiver<Call>,
    to_loop: mpsc::Sender<Call>,
    snaps: PublishedRx,
) {
    while let Some(call) = calls.recv().await {
        let snapshot = snaps.borrow().clone();
        match (&call.command, snapshot) {
            (Command::Status, Some(s)) => {
                // The client may have gone away; its answer is then not needed.
                let _ = call.reply.send(status(&s));
            }
            (Command::Status, None) => {
                let _ = call.reply.send(Outcome::Error(ErrorReply::not_ready()));
            }
            (Command::Version, _) => {
                let _ = call
                    .reply
                    .send(Outcome::Ok(Reply::Version(crate::commands::version())));
            }
            _ => {
                // Queued on its own task, so that a busy loop never holds up the next status.
                let to_loop = to_loop.clone();
                tokio::spawn(async move {
                    // A closed loop drops the reply sender: the caller reports the shutdown.
                    let _ = to_loop.send(call).await;
                });
            }
        }
    }
}

/// The `status` reply for a published snapshot.
#[must_use]
pub fn status(s: &Published) -> Outcome {
    Outcome::Ok(Reply::Status(Status {
        pool: s.report.pool.clone(),
        cgroups: s.report.cgroups.clone(),
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use memweight_proto::ctl::{ErrorKind, Pool};
    use tokio::sync::{oneshot, watch};

    use super::*;
    use crate::controller::{Counters, TickReport};

    fn snapshot(tick: u64) -> Arc<Published> {
        Arc::new(Published {
            report: Arc::new(TickReport {
                pool: Pool {
                    tick,
                    enforce: true,
                    capacity: 1,
                    ..Pool::default()
                },
                cgroups: Vec::new(),
                label_clamps: Vec::new(),
            }),
            counters: Counters::default(),
            at: Instant::now(),
            interval: Duration::from_secs(1),
        })
    }

    async fn ask(front: &mpsc::Sender<Call>, command: Command) -> oneshot::Receiver<Outcome> {
        let (reply, rx) = oneshot::channel();
        front
            .send(Call { command, reply })
            .await
            .expect("desk runs");
        rx
    }

    /// Regression (issue 9): `status` did not answer within 20 s while a first tick adopting
    /// 1,000 cgroups ran, because the loop only takes commands between ticks.
    #[tokio::test]
    async fn regression_status_answers_while_the_loop_is_busy() {
        let (front, calls) = mpsc::channel(4);
        // The loop is "in a tick": nobody reads its channel.
        let (to_loop, mut at_loop) = mpsc::channel(4);
        let (snaps_tx, snaps) = watch::channel(None);
        tokio::spawn(serve(calls, to_loop, snaps));

        // Before the first report the desk says "not ready" itself: the first tick is the
        // long one. `version` needs no report.
        let version =
            tokio::time::timeout(Duration::from_secs(2), ask(&front, Command::Version).await)
                .await
                .expect("version answers at once")
                .expect("answered");
        match version {
            Outcome::Ok(Reply::Version(v)) => {
                assert_eq!(v.program, "memweightd");
                assert_eq!(v.version, env!("CARGO_PKG_VERSION"));
                assert_eq!(v.protocol, memweight_proto::ctl::PROTOCOL_VERSION);
            }
            other => panic!("unexpected {other:?}"),
        }
        let early =
            tokio::time::timeout(Duration::from_secs(2), ask(&front, Command::Status).await)
                .await
                .expect("status answers at once before the first report")
                .expect("answered");
        match early {
            Outcome::Error(e) => assert_eq!(e.kind, ErrorKind::NotReady),
            other => panic!("unexpected {other:?}"),
        }
        assert!(
            at_loop.try_recv().is_err(),
            "not forwarded to the busy loop"
        );

        snaps_tx.send_replace(Some(snapshot(7)));
        let set = ask(
            &front,
            Command::Set {
                cgroup: "lab/c1".into(),
                weight: 2,
                min: None,
                max: None,
            },
        )
        .await;
        let answer =
            tokio::time::timeout(Duration::from_secs(2), ask(&front, Command::Status).await)
                .await
                .expect("status answers at once")
                .expect("answered");
        match answer {
            Outcome::Ok(Reply::Status(s)) => assert_eq!(s.pool.tick, 7),
            other => panic!("unexpected {other:?}"),
        }
        // `set` changes state: it waits for the loop.
        let fwd = at_loop.recv().await.expect("forwarded");
        assert!(matches!(fwd.command, Command::Set { .. }));
        drop(set);
    }
}
