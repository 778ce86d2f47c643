//! What the workload writes into memory, and the cheap PRNG that picks pages.
//!
//! The content matters to the lab: zram stores an all-zero page as almost nothing and
//! compresses a mostly-zero page well, so `pattern` (a nonzero header, zeros after it) makes
//! reclaim free real memory, `random` defeats compression, and `zero` is the degenerate case.

use clap::ValueEnum;

/// The magic word at the start of every `pattern` page ("mwload" plus a version byte).
pub const PATTERN_MAGIC: u64 = 0x6d77_6c6f_6164_0001;

/// Byte length of the word one touch writes.
pub const WORD: usize = std::mem::size_of::<u64>();

/// How pages are filled when they are first touched or swept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Fill {
    /// A small nonzero header and zeros: compressible but not a same-filled page.
    Pattern,
    /// Pseudo-random bytes: incompressible.
    Random,
    /// Zeros only.
    Zero,
}

/// xorshift64* (Marsaglia / Vigna): a few instructions per number, plenty for picking pages.
#[derive(Debug, Clone)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator from `seed`; a zero seed (a fixed point of xorshift) is replaced.
    pub fn new(seed: u64) -> XorShift {
        XorShift {
            state: if seed == 0 {
                0x9e37_79b9_7f4a_7c15
            } else {
                seed
            },
        }
    }

    /// The next pseudo-random 64-bit value.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A value in `0..n` from the high bits of `r` (Lemire's multiply-shift, no division).
    #[inline]
    pub fn scale(r: u64, n: u64) -> u64 {
        let wide = u128::from(r) * u128::from(n);
        // The product of two u64 is < 2^128, so its top 64 bits always fit in u64.
        u64::try_from(wide >> 64).unwrap_or(0)
    }
}

impl Fill {
    /// The word one random touch writes at the start of a page: nonzero for `pattern`, so a
    /// touched page never becomes a same-filled page.
    #[inline]
    pub fn touch_word(self, rng: &mut XorShift, seq: u64) -> u64 {
        match self {
            Fill::Pattern => PATTERN_MAGIC ^ (seq << 1),
            Fill::Random => rng.next_u64(),
            Fill::Zero => 0,
        }
    }

    /// Faults in a page of freshly mapped (hence zero) memory with the least writing that
    /// gives the page its final content.
    pub fn init_fresh_page(self, page: &mut [u8], index: u64, rng: &mut XorShift) {
        match self {
            Fill::Pattern => write_header(page, index),
            Fill::Random => fill_random(page, rng),
            Fill::Zero => {
                if let Some(first) = page.first_mut() {
                    *first = 0;
                }
            }
        }
    }

    /// Overwrites a whole page (or block) with this fill, whatever it held before.
    pub fn write_page(self, page: &mut [u8], index: u64, rng: &mut XorShift) {
        match self {
            Fill::Pattern => {
                page.fill(0);
                write_header(page, index);
            }
            Fill::Random => fill_random(page, rng),
            Fill::Zero => page.fill(0),
        }
    }
}

/// Writes `word` at the start of `page` if it has room for it.
#[inline]
pub fn write_word(page: &mut [u8], word: u64) {
    if let Some(dst) = page.get_mut(..WORD) {
        dst.copy_from_slice(&word.to_ne_bytes());
    }
}

/// Reads the word at the start of `page` (0 if it is shorter than a word).
#[inline]
pub fn read_word(page: &[u8]) -> u64 {
    page.get(..WORD)
        .and_then(|src| <[u8; WORD]>::try_from(src).ok())
        .map_or(0, u64::from_ne_bytes)
}

fn write_header(page: &mut [u8], index: u64) {
    write_word(page, PATTERN_MAGIC);
    if let Some(rest) = page.get_mut(WORD..) {
        write_word(rest, index);
    }
}

fn fill_random(page: &mut [u8], rng: &mut XorShift) {
    let mut chunks = page.chunks_exact_mut(WORD);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&rng.next_u64().to_ne_bytes());
    }
    let tail = chunks.into_remainder();
    let bytes = rng.next_u64().to_ne_bytes();
    for (dst, src) in tail.iter_mut().zip(bytes) {
        *dst = src;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_is_deterministic_and_never_stuck_at_zero() {
        let mut a = XorShift::new(0);
        let mut b = XorShift::new(0);
        let first: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
        assert!(first.iter().all(|&v| v != 0));
        assert_ne!(first[0], first[1]);
    }

    #[test]
    fn scale_stays_in_range_and_covers_it() {
        let mut rng = XorShift::new(42);
        let mut seen = [false; 7];
        for _ in 0..10_000 {
            let v = XorShift::scale(rng.next_u64(), 7);
            assert!(v < 7);
            seen[usize::try_from(v).expect("small")] = true;
        }
        assert!(seen.iter().all(|&s| s), "every bucket is hit: {seen:?}");
        assert_eq!(XorShift::scale(u64::MAX, 1), 0);
    }

    #[test]
    fn pattern_page_has_nonzero_header_and_zero_body() {
        let mut page = vec![0xffu8; 4096];
        let mut rng = XorShift::new(1);
        Fill::Pattern.write_page(&mut page, 5, &mut rng);
        assert_eq!(read_word(&page), PATTERN_MAGIC);
        assert_eq!(read_word(&page[WORD..]), 5);
        assert!(page[2 * WORD..].iter().all(|&b| b == 0));
    }

    #[test]
    fn random_page_is_not_mostly_zero() {
        let mut page = vec![0u8; 4099];
        let mut rng = XorShift::new(9);
        Fill::Random.write_page(&mut page, 0, &mut rng);
        let zeros = page.iter().filter(|&&b| b == 0).count();
        assert!(zeros < 100, "{zeros} zero bytes in a random page");
    }

    #[test]
    fn zero_fill_clears_and_touch_words_follow_the_fill() {
        let mut page = vec![3u8; 64];
        let mut rng = XorShift::new(1);
        Fill::Zero.write_page(&mut page, 0, &mut rng);
        assert!(page.iter().all(|&b| b == 0));
        assert_eq!(Fill::Zero.touch_word(&mut rng, 3), 0);
        assert_ne!(Fill::Pattern.touch_word(&mut rng, 0), 0);
        assert_ne!(Fill::Pattern.touch_word(&mut rng, u64::MAX), 0);
    }

    #[test]
    fn short_pages_do_not_panic() {
        let mut tiny = [0u8; 3];
        let mut rng = XorShift::new(1);
        for fill in [Fill::Pattern, Fill::Random, Fill::Zero] {
            fill.write_page(&mut tiny, 1, &mut rng);
            fill.init_fresh_page(&mut tiny, 1, &mut rng);
        }
        write_word(&mut tiny, 1);
        assert_eq!(read_word(&tiny), 0);
    }
}
