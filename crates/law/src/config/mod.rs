//! The daemon's TOML configuration: parsing, defaults and validation.
//!
//! Every key is documented in `docs/configuration.md`. Parsing is pure (`&str` in, [`Config`]
//! out) so `memweightd --check-config` and the tests use the same code as the daemon.
//!
//! The rooms:
//!
//! * here: the entry points ([`Config::load`], [`Config::parse`]) and [`ConfigError`];
//! * `sections`: the file's shape — [`Config`] and its sections (`[capacity]`, `[control]`,
//!   `[metrics]`, `[containers]`, `[[cgroup]]`), each with its defaults;
//! * `values`: the value types a key may hold and their parsers ([`Amount`], [`Reserve`],
//!   [`Interval`], [`parse_amount`], [`parse_interval`]); they never panic;
//! * `validate`: what the types cannot check, section by section ([`Config::validate`]);
//! * `rules`: the `[[cgroup]]` rules checked and compiled into [`Rules`] (exact paths, globs,
//!   the depth discovery walks, [`Settings`] and [`LabelBounds`] per rule), and [`nests`];
//! * `tests`: the rooms' tests, proptests that no input panics among them.
//!
//! No room reads the clock or any file but `Config::load`'s; the systemd watchdog is not
//! checked here (the daemon's `systemd::load_config` does).

mod rules;
mod sections;
#[cfg(test)]
mod tests;
mod validate;
mod values;

use std::path::{Path, PathBuf};

pub use rules::{LabelBounds, Rule, Rules, Settings, nests};
pub use sections::{
    CapacityConfig, CapacityMode, CgroupRule, Config, ContainersConfig, ControlConfig,
    DEFAULT_ENGINE_SOCKETS, DEFAULT_GUARD_PERCENT, DEFAULT_RECLAIM_PASSES, MAX_RECLAIM_PASSES,
    MAX_TICK, MIN_TICK, MetricsConfig,
};
pub use values::{Amount, Interval, Reserve, parse_amount, parse_interval};

/// Errors found while loading or validating a configuration file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse or had a wrong key or value.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What the TOML parser said, with line and column.
        message: String,
    },
    /// A value parsed but makes no sense.
    #[error("{path}: {field}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which key, e.g. `cgroup[2].weight`.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// Largest configuration file read; anything longer is not a memweight config.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl Config {
    /// Reads `path` (at most [`MAX_CONFIG_BYTES`]) and validates it like [`Config::parse`].
    pub fn load(path: &Path) -> Result<(Config, Rules), ConfigError> {
        use std::io::Read as _;
        let read_err = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(read_err)?
            .take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                field: "(file)".into(),
                message: format!("longer than {MAX_CONFIG_BYTES} bytes; is this the right file?"),
            });
        }
        Config::parse(&text, path)
    }

    /// Parses and validates `text`; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<(Config, Rules), ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        let rules = cfg.validate(path)?;
        Ok((cfg, rules))
    }
}

/// A key that failed a check and why: `("tick", "must be between …")`.
type Problem = (&'static str, String);

/// Builds the [`ConfigError::Invalid`] of the file at `path`.
fn invalid_in(path: &Path) -> impl Fn(String, String) -> ConfigError + '_ {
    move |field, message| ConfigError::Invalid {
        path: path.to_owned(),
        field,
        message,
    }
}
