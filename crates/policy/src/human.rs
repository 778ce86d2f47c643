//! Byte counts for humans: `312 MiB`, `2000 MiB`, `15.5 GiB` (binary units, one decimal at
//! most). A unit is used once the value reaches 10 000 of the next smaller unit, so values
//! keep four significant digits (`2000 MiB`, not `2 GiB` for 1.95 GiB).

use std::fmt;

const UNITS: [(&str, u64); 6] = [
    ("EiB", 1 << 60),
    ("PiB", 1 << 50),
    ("TiB", 1 << 40),
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
];

/// Wraps a byte count so that it displays in the largest binary unit it reaches.
#[must_use]
pub const fn bytes(n: u64) -> HumanBytes {
    HumanBytes(n)
}

/// A byte count that displays like `833.3 MiB`; see [`bytes`] and the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanBytes(pub u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let Some(&(unit, size)) = UNITS
            .iter()
            .find(|&&(_, size)| u128::from(n) >= u128::from(size) * 10_000 / 1024)
        else {
            return write!(f, "{n} B");
        };
        // Tenths, rounded to nearest, in u128 so that EiB-sized values cannot overflow.
        let tenths = (u128::from(n) * 10 + u128::from(size) / 2) / u128::from(size);
        let (whole, frac) = (tenths / 10, tenths % 10);
        if frac == 0 {
            write!(f, "{whole} {unit}")
        } else {
            write!(f, "{whole}.{frac} {unit}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn formats_each_unit() {
        assert_eq!(bytes(0).to_string(), "0 B");
        assert_eq!(bytes(9999).to_string(), "9999 B");
        assert_eq!(bytes(10_000).to_string(), "9.8 KiB");
        assert_eq!(bytes(312 << 20).to_string(), "312 MiB");
        assert_eq!(bytes(2000 << 20).to_string(), "2000 MiB");
        assert_eq!(bytes(3 << 29).to_string(), "1536 MiB");
        assert_eq!(bytes(31 << 29).to_string(), "15.5 GiB");
        assert_eq!(bytes(u64::MAX).to_string(), "16 EiB");
    }

    #[test]
    fn rounds_to_one_decimal() {
        // 833⅓ MiB.
        assert_eq!(bytes(873_813_333).to_string(), "833.3 MiB");
        // Just below 20 MiB rounds up to 20 MiB rather than printing "20.0".
        assert_eq!(bytes((20 << 20) - 1).to_string(), "20 MiB");
    }
}
