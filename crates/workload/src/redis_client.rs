//! `redis`: a client of a real Redis server, as seed 002's clients were. It loads a dataset of
//! `keys` values (each `value_size` bytes, filled per `--fill`), then sends requests over one
//! connection: a GET of a uniformly random key, or, for `set_pct` % of the requests, a SET of
//! one, `pipeline` requests per round trip. Ops are requests answered; the load does not count.
//!
//! Why pipelining (issue 19): under TCG one request answered alone costs ~0.6 ms of client
//! and server round trip, while a zram swap-in costs tens of µs, so the request rate barely
//! followed how much of the dataset was resident (ratios 0.85–1.21 between two fully resident
//! servers). With 32 requests per round trip the round trip is shared, the server's own work
//! per request — where a swapped-out value is faulted back — is most of what is timed.
//!
//! The request mix is a pure function of the PRNG ([`Request::pick`]), so it is tested
//! without a server; the lab runs the server.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use redis::Connection;

use crate::fill::{Fill, XorShift, write_word};
use crate::modes::{Env, Shared};

/// SETs sent in one pipeline while loading.
const LOAD_BATCH: u64 = 64;

/// How long to wait for the server to accept connections (it may still be starting).
const CONNECT_PATIENCE: Duration = Duration::from_secs(180);

/// What the client does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisPlan {
    /// The server.
    pub addr: SocketAddr,
    /// Keys in the dataset (at least 1).
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Percentage of requests that are SETs (0..=100).
    pub set_pct: u8,
    /// Requests sent per round trip (1: one at a time).
    pub pipeline: u32,
}

/// One request of the measured loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// GET of this key index.
    Get(u64),
    /// SET of this key index.
    Set(u64),
}

impl Request {
    /// The next request: a uniformly random key; a SET with probability `set_pct` %.
    pub fn pick(rng: &mut XorShift, keys: u64, set_pct: u8) -> Request {
        let key = XorShift::scale(rng.next_u64(), keys);
        if XorShift::scale(rng.next_u64(), 100) < u64::from(set_pct) {
            Request::Set(key)
        } else {
            Request::Get(key)
        }
    }
}

/// The name of key `index` (fixed width, so every key costs the server the same).
pub fn key_name(index: u64) -> String {
    format!("key:{index:010}")
}

/// Fills `value` for key `index` with the fill's word for the key (`pattern`: one repeated
/// nonzero word, compressible as the other workloads' pages; `random`: fresh random words),
/// with the key's index in the first word so that no two values are the same.
fn make_value(value: &mut [u8], index: u64, fill: Fill, rng: &mut XorShift) {
    for chunk in value.chunks_mut(8) {
        let word = fill.touch_word(rng, index).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    if value.len() >= 8 {
        write_word(value, index);
    }
}

fn connect(addr: SocketAddr, shared: &Shared) -> Result<Option<Connection>> {
    let client = redis::Client::open(format!("redis://{addr}/")).context("bad Redis address")?;
    let started = Instant::now();
    loop {
        match client.get_connection_with_timeout(Duration::from_secs(5)) {
            Ok(con) => return Ok(Some(con)),
            Err(e) if started.elapsed() > CONNECT_PATIENCE => {
                bail!(
                    "no Redis server at {addr} after {} s: {e}",
                    CONNECT_PATIENCE.as_secs()
                )
            }
            Err(_) => {
                if !shared.sleep_unless_stopped(Duration::from_millis(500)) {
                    return Ok(None);
                }
            }
        }
    }
}

/// Connects (waiting for the server), loads the dataset, then serves requests until stopped.
pub fn run(plan: &RedisPlan, env: Env, shared: &Shared) -> Result<()> {
    let Some(mut con) = connect(plan.addr, shared)? else {
        return Ok(());
    };
    let mut rng = XorShift::new(env.seed);
    let mut value = vec![0u8; plan.value_size];
    let started = Instant::now();
    let mut index = 0;
    while index < plan.keys {
        if shared.stopped() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for k in index..(index + LOAD_BATCH).min(plan.keys) {
            make_value(&mut value, k, env.fill, &mut rng);
            pipe.set(key_name(k), &value[..]).ignore();
        }
        pipe.query::<()>(&mut con)
            .with_context(|| format!("loading keys from {index} failed"))?;
        index += LOAD_BATCH;
    }
    tracing::info!(
        keys = plan.keys,
        mib = (plan.keys * plan.value_size as u64) >> 20,
        secs = started.elapsed().as_secs_f64(),
        "dataset loaded; serving random requests"
    );
    let mut batch = Vec::with_capacity(plan.pipeline as usize);
    while !shared.stopped() {
        batch.clear();
        batch.extend((0..plan.pipeline).map(|_| Request::pick(&mut rng, plan.keys, plan.set_pct)));
        let mut pipe = redis::pipe();
        for &r in &batch {
            match r {
                Request::Get(k) => {
                    pipe.get(key_name(k));
                }
                Request::Set(k) => {
                    make_value(&mut value, k, env.fill, &mut rng);
                    pipe.set(key_name(k), &value[..]).ignore();
                }
            }
        }
        let got: Vec<Option<Vec<u8>>> = pipe
            .query(&mut con)
            .with_context(|| format!("a pipeline of {} requests failed", batch.len()))?;
        let gets = batch.iter().filter_map(|r| match r {
            Request::Get(k) => Some(*k),
            Request::Set(_) => None,
        });
        if got.len() != gets.clone().count() {
            bail!(
                "the server answered {} GETs of {} in a pipeline",
                got.len(),
                gets.count()
            );
        }
        for (k, v) in gets.zip(got) {
            check_value(k, v, plan.value_size)?;
        }
        shared.add(u64::from(plan.pipeline));
    }
    Ok(())
}

/// A GET's answer must be the whole value: a wrong size or a missing key is a broken
/// server (or a restarted one), not a slow one.
fn check_value(k: u64, got: Option<Vec<u8>>, value_size: usize) -> Result<()> {
    match got {
        Some(v) if v.len() == value_size => Ok(()),
        Some(v) => bail!(
            "GET {} returned {} bytes, not {value_size}",
            key_name(k),
            v.len()
        ),
        None => bail!(
            "GET {}: the key is gone (did the server restart?)",
            key_name(k)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_cover_the_keyspace_with_the_asked_share_of_sets() {
        let mut rng = XorShift::new(7);
        let keys: u64 = 1000;
        let mut seen = [false; 1000];
        let mut sets = 0;
        let n = 100_000;
        for _ in 0..n {
            let k = match Request::pick(&mut rng, keys, 5) {
                Request::Get(k) => k,
                Request::Set(k) => {
                    sets += 1;
                    k
                }
            };
            assert!(k < keys);
            seen[usize::try_from(k).expect("small")] = true;
        }
        assert!(seen.iter().all(|&s| s), "every key is asked for");
        // 5 % of 100 000 = 5 000; binomial sd ≈ 69.
        assert!((4_600..5_400).contains(&sets), "{sets} SETs");
        let mut rng = XorShift::new(7);
        assert!(
            (0..1000).all(|_| matches!(Request::pick(&mut rng, keys, 0), Request::Get(_))),
            "no SET at 0 %"
        );
    }

    #[test]
    fn a_get_must_return_the_whole_value() {
        assert!(check_value(1, Some(vec![0; 4000]), 4000).is_ok());
        let short = check_value(1, Some(vec![0; 10]), 4000).expect_err("short");
        assert!(short.to_string().contains("returned 10 bytes"), "{short}");
        let gone = check_value(2, None, 4000).expect_err("missing");
        assert!(gone.to_string().contains("key:0000000002"), "{gone}");
    }

    #[test]
    fn values_are_distinct_and_sized() {
        let mut rng = XorShift::new(1);
        let mut a = vec![0u8; 4000];
        let mut b = vec![0u8; 4000];
        make_value(&mut a, 1, Fill::Pattern, &mut rng);
        make_value(&mut b, 2, Fill::Pattern, &mut rng);
        assert_ne!(a, b);
        assert!(a.iter().any(|&x| x != 0));
        let mut tiny = vec![0u8; 3];
        make_value(&mut tiny, 9, Fill::Random, &mut rng);
        assert_eq!(key_name(42), "key:0000000042");
    }
}
