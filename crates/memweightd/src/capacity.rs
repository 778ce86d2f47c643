//! The pool capacity `C`: how much memory the managed cgroups may hold together this tick.
//!
//! Pure: host numbers in, bytes out. In `auto` mode the pool is what the cgroups hold now plus
//! what the host can still give before its free-memory reserve, minus a cut that grows while
//! host memory PSI stays above a threshold and decays when it clears. This is how external
//! pressure (another process, a balloon driver) becomes weighted reclaim instead of the
//! kernel's global LRU.
//!
//! A shortage is measured the way the kernel sees it: the default reserve is the width of the
//! kernel's reclaim band (Σ `high` − `min` watermarks, [`crate::config::Reserve::Watermarks`]),
//! not a fixed share of RAM; and stalls the daemon causes itself — tasks of managed cgroups
//! throttled at the `memory.high` it wrote — do not count towards the PSI cut
//! ([`HostView::own_stall`]), so its own throttling cannot shrink the pool further.
//!
//! In `kernel` mode the pool never shrinks below what the managed cgroups hold: the kernel's
//! own reclaim decides how much they keep together (it takes cold memory outside them first,
//! where `auto` keeps MemAvailable above the band kswapd works in and so never lets it), and
//! the daemon only moves memory between them by weight.

use crate::config::{CapacityConfig, CapacityMode, Reserve};

/// The reserve when `"watermarks"` is asked for but `/proc/zoneinfo` could not be read: 1 % of
/// MemTotal (about what the band is with `vm.watermark_scale_factor = 50`).
const FALLBACK_RESERVE_PERCENT: u64 = 1;

/// Host numbers the capacity depends on, in bytes and percent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostView {
    /// MemTotal.
    pub mem_total: u64,
    /// MemAvailable.
    pub mem_available: u64,
    /// Host memory PSI `some avg10`, when the kernel has PSI.
    pub psi_some_avg10: Option<f64>,
    /// Σ usage of the managed cgroups.
    pub total_usage: u64,
    /// The kernel's reclaim band, Σ (`high` − `min`) watermarks, when `/proc/zoneinfo` was read.
    pub watermark_band: Option<u64>,
    /// The part of the host's PSI `some avg10` that the daemon's own limits explain: the
    /// highest `some avg10` of a managed cgroup held at a `memory.high` the daemon lowered
    /// below its original (its tasks sleep in the kernel's throttling, which PSI counts as a
    /// memory stall at every level up to the root). `0.0` when none is held.
    pub own_stall: f64,
}

/// State carried from tick to tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PsiCut(pub u64);

/// The capacity and how it was made, for `explain` and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// `C` in bytes.
    pub bytes: u64,
    /// Shortfall of MemAvailable below the reserve (auto mode).
    pub shortfall: u64,
    /// What PSI took off (auto mode).
    pub psi_cut: u64,
    /// The MemAvailable reserve this tick (auto mode).
    pub reserve: u64,
}

/// A managed cgroup whose own memory PSI `some avg10` is at least this (%) is reaching for
/// more than it holds, in `mode = "kernel"`: the kernel's reclaim is taking its memory and it
/// faults it back. Its demand is then the whole pool (capped by its own limits), so that a
/// cgroup above its weighted share gives way to it.
pub const STALL_DEMAND_PCT: f64 = 1.0;

/// A managed cgroup that faulted back at least this many bytes since its previous sample is
/// reaching for more than it holds, in `mode = "kernel"`, as with [`STALL_DEMAND_PCT`]: a
/// server answering one request at a time stalls little (Redis under a balloon: PSI 0.1–1.6 %
/// while a third of its dataset sat in swap) but refaults steadily.
pub const REFAULT_DEMAND: u64 = 1 << 20;

/// The MemAvailable reserve this tick.
fn reserve_of(cfg: &CapacityConfig, host: &HostView) -> u64 {
    match cfg.reserve {
        Reserve::Amount(a) => a.of(host.mem_total),
        Reserve::Watermarks => host
            .watermark_band
            .unwrap_or(host.mem_total / 100 * FALLBACK_RESERVE_PERCENT),
    }
}

/// Computes this tick's capacity and the next PSI cut.
#[must_use]
pub fn capacity(cfg: &CapacityConfig, host: &HostView, cut: PsiCut) -> (Capacity, PsiCut) {
    match cfg.mode {
        CapacityMode::Fixed => {
            let bytes = cfg.fixed.map_or(host.mem_total, |a| a.of(host.mem_total));
            (
                Capacity {
                    bytes,
                    shortfall: 0,
                    psi_cut: 0,
                    reserve: 0,
                },
                PsiCut(0),
            )
        }
        CapacityMode::Kernel => {
            let reserve = reserve_of(cfg, host);
            let shortfall = reserve.saturating_sub(host.mem_available);
            let headroom = host.mem_available.saturating_sub(reserve);
            (
                Capacity {
                    bytes: host
                        .total_usage
                        .saturating_add(headroom)
                        .min(host.mem_total.max(host.total_usage)),
                    shortfall,
                    psi_cut: 0,
                    reserve,
                },
                PsiCut(0),
            )
        }
        CapacityMode::Auto => {
            let reserve = reserve_of(cfg, host);
            let shortfall = reserve.saturating_sub(host.mem_available);
            let headroom = host.mem_available.saturating_sub(reserve);
            // Stalls outside what the daemon's own throttling explains.
            let stalled = cfg.psi_threshold > 0.0
                && host
                    .psi_some_avg10
                    .is_some_and(|p| p - host.own_stall.max(0.0) > cfg.psi_threshold);
            let max_cut = cfg.psi_max_cut.of(host.mem_total);
            let next = if stalled {
                cut.0
                    .saturating_add(cfg.psi_step.of(host.mem_total))
                    .min(max_cut)
            } else {
                cut.0 / 2
            };
            let bytes = host
                .total_usage
                .saturating_add(headroom)
                .saturating_sub(shortfall)
                .saturating_sub(next)
                .min(host.mem_total);
            (
                Capacity {
                    bytes,
                    shortfall,
                    psi_cut: next,
                    reserve,
                },
                PsiCut(next),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Amount;

    const MIB: u64 = 1 << 20;

    fn host(avail: u64, psi: Option<f64>) -> HostView {
        HostView {
            mem_total: 1000 * MIB,
            mem_available: avail,
            psi_some_avg10: psi,
            total_usage: 600 * MIB,
            watermark_band: Some(6 * MIB),
            own_stall: 0.0,
        }
    }

    fn auto() -> CapacityConfig {
        CapacityConfig {
            reserve: Reserve::Amount(Amount::Bytes(100 * MIB)),
            psi_threshold: 10.0,
            psi_step: Amount::Bytes(10 * MIB),
            psi_max_cut: Amount::Bytes(25 * MIB),
            ..CapacityConfig::default()
        }
    }

    #[test]
    fn auto_grows_with_headroom_and_shrinks_with_shortfall() {
        let (c, _) = capacity(&auto(), &host(300 * MIB, None), PsiCut(0));
        assert_eq!(c.bytes, 800 * MIB);
        let (c, _) = capacity(&auto(), &host(40 * MIB, None), PsiCut(0));
        assert_eq!(c.bytes, 540 * MIB);
        assert_eq!(c.shortfall, 60 * MIB);
    }

    #[test]
    fn psi_cut_grows_to_its_cap_and_decays() {
        let cfg = auto();
        let h = host(100 * MIB, Some(50.0));
        let (c1, k1) = capacity(&cfg, &h, PsiCut(0));
        assert_eq!(c1.bytes, 590 * MIB);
        let (_, k2) = capacity(&cfg, &h, k1);
        let (c3, k3) = capacity(&cfg, &h, k2);
        assert_eq!(k3.0, 25 * MIB, "capped at psi_max_cut");
        assert_eq!(c3.bytes, 575 * MIB);
        let (c4, k4) = capacity(&cfg, &host(100 * MIB, Some(1.0)), k3);
        assert!(k4.0 < k3.0 && c4.bytes > c3.bytes);
    }

    #[test]
    fn psi_threshold_zero_turns_it_off() {
        let cfg = CapacityConfig {
            psi_threshold: 0.0,
            ..auto()
        };
        let (c, k) = capacity(&cfg, &host(100 * MIB, Some(99.0)), PsiCut(0));
        assert_eq!((c.bytes, k.0), (600 * MIB, 0));
    }

    /// Regression (issue 11): with a reserve of a few % of RAM the daemon saw a shortage where
    /// the kernel kept everything resident (MemAvailable ~58 MiB on a 1 GiB guest, no swap-in)
    /// and squeezed both cgroups. The default reserve is the kernel's reclaim band.
    #[test]
    fn regression_squeezed_without_a_shortage_reserve_follows_watermarks() {
        let cfg = CapacityConfig {
            reserve: Reserve::Watermarks,
            ..auto()
        };
        let (c, _) = capacity(&cfg, &host(58 * MIB, Some(0.0)), PsiCut(0));
        assert_eq!((c.reserve, c.shortfall), (6 * MIB, 0));
        assert_eq!(c.bytes, 652 * MIB, "usage + what is left above the band");
        let (c, _) = capacity(&cfg, &host(2 * MIB, None), PsiCut(0));
        assert_eq!(c.shortfall, 4 * MIB, "short once inside the band");
        let blind = HostView {
            watermark_band: None,
            ..host(58 * MIB, None)
        };
        assert_eq!(
            capacity(&cfg, &blind, PsiCut(0)).0.reserve,
            10 * MIB,
            "1 % fallback"
        );
    }

    /// Regression (issue 11): the daemon's own throttling raised host PSI from 0 to ~40 %, and
    /// the PSI cut it triggered shrank the pool further. Stalls of cgroups held at the daemon's
    /// memory.high no longer count; stalls beyond them still do.
    #[test]
    fn regression_own_throttling_shrank_the_pool_further() {
        let cfg = auto();
        let own = HostView {
            own_stall: 45.0,
            ..host(100 * MIB, Some(50.0))
        };
        let (c, k) = capacity(&cfg, &own, PsiCut(0));
        assert_eq!(
            (c.psi_cut, k.0),
            (0, 0),
            "50 % host, 45 % ours: not a shortage signal"
        );
        let other = HostView {
            own_stall: 20.0,
            ..host(100 * MIB, Some(50.0))
        };
        let (c, _) = capacity(&cfg, &other, PsiCut(0));
        assert_eq!(
            c.psi_cut,
            10 * MIB,
            "30 % of stalls outside the held cgroups still cut"
        );
    }

    /// In `kernel` mode a shortage does not shrink the pool below the cgroups' usage (the
    /// kernel's reclaim takes what it needs from wherever memory is cold); headroom above the
    /// reserve still lets it grow, and host PSI cuts nothing.
    #[test]
    fn kernel_mode_never_shrinks_below_usage() {
        let cfg = CapacityConfig {
            mode: CapacityMode::Kernel,
            ..auto()
        };
        let (c, k) = capacity(&cfg, &host(40 * MIB, Some(90.0)), PsiCut(20 * MIB));
        assert_eq!(c.bytes, 600 * MIB, "short by 60 MiB: the kernel decides");
        assert_eq!((c.shortfall, c.psi_cut, k.0), (60 * MIB, 0, 0));
        let (c, _) = capacity(&cfg, &host(300 * MIB, None), PsiCut(0));
        assert_eq!(c.bytes, 800 * MIB, "usage + MemAvailable above the reserve");
    }

    #[test]
    fn fixed_uses_percent_of_total() {
        let cfg = CapacityConfig {
            mode: CapacityMode::Fixed,
            fixed: Some(Amount::Percent(50.0)),
            ..CapacityConfig::default()
        };
        assert_eq!(
            capacity(&cfg, &host(0, Some(99.0)), PsiCut(7)).0.bytes,
            500 * MIB
        );
    }
}
