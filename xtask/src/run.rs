//! The lab verbs: `run` one scenario, `test` the CI scenarios on both kernels, `fetch`.

use std::fmt::Write as _;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use lab_agent::scenario::{BASED_ON, Guest, Install, Kernel, Scenario, overlay};

use crate::checks::{self, Outcome};
use crate::kernel::{self, KernelFiles};
use crate::results::{Decoder, Results};
use crate::summary::{self, Summary};
use crate::{deb, deps, guest, hostimg, initramfs, judge, plot, prom, qmp, vm};

/// CI must finish within this; `lab test` warns when it does not.
const CI_BUDGET: Duration = Duration::from_secs(1500);

fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn lab_dir(ws: &Path) -> PathBuf {
    ws.join("target").join("lab")
}

/// `cargo xtask test`: the workspace's tests, then the lab's CI scenarios.
pub fn test_all(lab: bool) -> Result<bool> {
    let ws = workspace();
    eprintln!("xtask: cargo test --workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = std::process::Command::new(cargo);
    cmd.current_dir(&ws).args(["test", "--workspace", "-j2"]);
    // The fake cgroupfs trees (thousands of small files each) on tmpfs: on this machine's disk
    // creating them costs 10–15 s of system time per scale test, on /dev/shm under one.
    let shm = Path::new("/dev/shm");
    if std::env::var_os("TMPDIR").is_none() && shm.is_dir() {
        cmd.env("TMPDIR", shm);
    }
    let status = cmd.status().context("cannot run cargo test")?;
    if !status.success() {
        eprintln!("xtask: cargo test --workspace failed ({status})");
        return Ok(false);
    }
    if !lab {
        return Ok(true);
    }
    eprintln!("xtask: cargo xtask lab test");
    lab_test(None, None)
}

/// `cargo xtask deb`.
pub fn deb(revision: Option<&str>, lint: bool, build: bool) -> Result<bool> {
    let ws = workspace();
    let out_dir = ws.join("target/debian");
    let deb = deb::build(
        &ws,
        &lab_dir(&ws),
        build,
        &deb::Options {
            revision,
            fast: false,
            out_dir: &out_dir,
        },
    )?;
    println!("{}", deb.display());
    if lint {
        deb::lint(&deb)?;
    }
    Ok(true)
}

/// The host guest's Debian packages, built once per `cargo xtask` run (after the guest
/// binaries, which every verb builds before it boots anything).
fn lab_packages(lab: &Path) -> Result<deb::LabPackages> {
    static BUILT: Mutex<Option<deb::LabPackages>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(p) = &*built {
        return Ok(p.clone());
    }
    let p = deb::lab_packages(&workspace(), lab)?;
    *built = Some(p.clone());
    Ok(p)
}

/// `cargo xtask lab fetch`.
pub fn lab_fetch() -> Result<bool> {
    let lab = lab_dir(&workspace());
    deps::ensure_host_tools()?;
    for k in Kernel::ALL {
        let kf = kernel::fetch(&lab, k)?;
        eprintln!(
            "lab: kernel {k}: {} ({}), modules: {}",
            kf.package,
            kf.vmlinuz.display(),
            kf.modules.len()
        );
    }
    Ok(true)
}

/// The most files a chain of `based_on` may hold.
const MAX_BASED_ON: usize = 4;

/// A scenario file as a TOML table, laid over the files it is based on
/// ([`lab_agent::scenario::overlay`]), the chain `seen` so far.
fn resolve(path: &Path, seen: &mut Vec<PathBuf>) -> Result<toml::Table> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read scenario {}", path.display()))?;
    let table: toml::Table = toml::from_str(&text).with_context(|| {
        format!(
            "scenario {} is not valid TOML for the lab format (see docs/lab.md)",
            path.display()
        )
    })?;
    seen.push(path.to_path_buf());
    let Some(based_on) = table.get(BASED_ON) else {
        return Ok(table);
    };
    let Some(name) = based_on.as_str() else {
        bail!(
            "scenario {}: {BASED_ON} must be a file name, like \"seed002.toml\"",
            path.display()
        );
    };
    let base = path.parent().unwrap_or(Path::new(".")).join(name);
    if seen.contains(&base) {
        bail!(
            "scenario {}: {BASED_ON} = {name:?} goes round in a circle ({})",
            path.display(),
            seen.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ")
        );
    }
    if seen.len() >= MAX_BASED_ON {
        bail!(
            "scenario {}: {BASED_ON} chains more than {MAX_BASED_ON} files; base this one on \
             the scenario it changes",
            path.display()
        );
    }
    let base = resolve(&base, seen)
        .with_context(|| format!("scenario {} is based on {name:?}", path.display()))?;
    Ok(overlay(base, table))
}

/// A scenario file's stem, the text the guest receives (the file laid over what it is
/// [`BASED_ON`]), and the scenario.
fn load(path: &Path) -> Result<(String, String, Scenario)> {
    let table = resolve(path, &mut Vec::new())?;
    let text = toml::to_string(&table)
        .with_context(|| format!("cannot write scenario {} back", path.display()))?;
    let scenario =
        Scenario::parse(&text).with_context(|| format!("scenario {}", path.display()))?;
    let name = path.file_stem().map_or_else(
        || "scenario".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    Ok((name, text, scenario))
}

/// `cargo xtask lab run`.
pub fn lab_run(path: &Path, out: &Path, kernel: Option<Kernel>, build: bool) -> Result<bool> {
    let ws = workspace();
    let lab = lab_dir(&ws);
    let (name, text, scenario) = load(path)?;
    let k = kernel.unwrap_or(scenario.kernel);
    deps::ensure_host_tools()?;
    let kf = kernel::fetch(&lab, k)?;
    let bins = guest::build(&ws, &lab, build)?;
    let report = execute(&lab, &name, &text, &scenario, k, &kf, &bins, out)?;
    println!("\n{}", report.summary.table());
    print_checks(&report.checks);
    println!("plot: {}", out.join("plot.svg").display());
    println!("summary: {}", out.join("summary.json").display());
    Ok(report.passed())
}

/// Scenarios the issues name that `lab test` runs besides `ci-*.toml`.
const CI_EXTRA: &[&str] = &[
    "ctl-live.toml",
    "host-hostile.toml",
    "host-kube.toml",
    "host-package.toml",
    "host-podman.toml",
];

/// Whether `lab test` runs `scenario` on kernel `k` (its `ci_kernels`, or every kernel).
fn runs_in_ci_on(scenario: &Scenario, k: Kernel) -> bool {
    scenario.ci_kernels.is_empty() || scenario.ci_kernels.contains(&k)
}

/// `cargo xtask lab test`.
pub fn lab_test(filter: Option<&str>, only: Option<Kernel>) -> Result<bool> {
    let started = Instant::now();
    let ws = workspace();
    let lab = lab_dir(&ws);
    let dir = ws.join("tests/lab/scenarios");
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                (n.starts_with("ci-") && n.ends_with(".toml")) || CI_EXTRA.contains(&n)
            })
        })
        .filter(|p| filter.is_none_or(|f| p.to_string_lossy().contains(f)))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no ci-*.toml scenarios in {} match", dir.display());
    }
    // Baselines the checks compare against run first, on each kernel, into the same folder.
    let mut baselines: Vec<PathBuf> = Vec::new();
    for f in &files {
        for c in &load(f)?.2.checks {
            if let Some(b) = c.baseline() {
                let p = dir.join(b);
                if !files.contains(&p) && !baselines.contains(&p) {
                    baselines.push(p);
                }
            }
        }
    }
    baselines.extend(files);
    let scenarios = baselines
        .iter()
        .map(|f| load(f))
        .collect::<Result<Vec<_>>>()?;
    deps::ensure_host_tools()?;
    let kernels: Vec<Kernel> = only.map_or_else(|| Kernel::ALL.to_vec(), |k| vec![k]);
    let kfs = kernels
        .iter()
        .map(|&k| kernel::fetch(&lab, k).map(|kf| (k, kf)))
        .collect::<Result<Vec<_>>>()?;
    let bins = guest::build(&ws, &lab, true)?;

    let mut table = String::new();
    let mut all_pass = true;
    for (k, kf) in &kfs {
        for (name, text, scenario) in &scenarios {
            if !runs_in_ci_on(scenario, *k) {
                eprintln!("lab: {name} is not run on {k}: its ci_kernels do not name it");
                continue;
            }
            let out = lab.join("ci").join(format!("{name}-{k}"));
            let line = match execute(&lab, name, text, scenario, *k, kf, &bins, &out) {
                Ok(report) => {
                    print_checks(&report.checks);
                    let failed: Vec<&str> = report
                        .checks
                        .iter()
                        .filter(|c| !c.pass)
                        .map(|c| c.check.as_str())
                        .collect();
                    all_pass &= report.passed();
                    format!(
                        "{:<4} {name:<24} {k:<5} {:>5.0}s max error {:>6}  {}",
                        if report.passed() { "PASS" } else { "FAIL" },
                        report.summary.wall_time_s,
                        report
                            .summary
                            .max_error_pct
                            .map_or_else(|| "n/a".into(), |e| format!("{e:.1}%")),
                        if failed.is_empty() {
                            String::new()
                        } else {
                            format!("failed: {}", failed.join(", "))
                        }
                    )
                }
                Err(e) => {
                    all_pass = false;
                    eprintln!("lab: {name} on {k} failed: {e:#}");
                    format!("FAIL {name:<24} {k:<5} run failed: {e:#}")
                }
            };
            println!("{line}");
            let _ = writeln!(table, "{line}");
        }
    }
    let took = started.elapsed();
    println!(
        "\nlab test results (outputs in {}):\n{table}",
        lab.join("ci").display()
    );
    println!("total {:.0}s", took.as_secs_f64());
    if took > CI_BUDGET {
        eprintln!(
            "lab: warning: took {:.0}s, over the {}s CI budget",
            took.as_secs_f64(),
            CI_BUDGET.as_secs()
        );
    }
    Ok(all_pass)
}

/// Runs `files` one after another on each of `kernels` into `out/<scenario>-<kernel>`, the
/// guest programs built once, with a progress line before each; `each` gets every run's report
/// or why it failed.
fn run_batch(
    files: &[PathBuf],
    out: &Path,
    kernels: &[Kernel],
    mut each: impl FnMut(&str, Kernel, &Path, Result<Report>),
) -> Result<()> {
    let ws = workspace();
    let lab = lab_dir(&ws);
    let loaded = files.iter().map(|f| load(f)).collect::<Result<Vec<_>>>()?;
    deps::ensure_host_tools()?;
    let kfs = kernels
        .iter()
        .map(|&k| kernel::fetch(&lab, k).map(|kf| (k, kf)))
        .collect::<Result<Vec<_>>>()?;
    let bins = guest::build(&ws, &lab, true)?;
    let started = Instant::now();
    let total = loaded.len() * kfs.len();
    for (n, ((k, kf), (name, text, scenario))) in kfs
        .iter()
        .flat_map(|kf| loaded.iter().map(move |l| (kf, l)))
        .enumerate()
    {
        eprintln!(
            "lab: batch {}/{total} on {k}: {name} ({:.0} min so far)",
            n + 1,
            started.elapsed().as_secs_f64() / 60.0
        );
        let dir = out.join(format!("{name}-{k}"));
        let report = execute(&lab, name, text, scenario, *k, kf, &bins, &dir);
        each(name, *k, &dir, report);
    }
    Ok(())
}

/// `cargo xtask lab compare`.
pub fn lab_compare(scenarios: &[PathBuf], out: &Path, kernels: &[Kernel]) -> Result<bool> {
    let ws = workspace();
    let files: Vec<PathBuf> = if scenarios.is_empty() {
        ["seed002-default", "seed002-static-low", "seed002"]
            .iter()
            .map(|n| ws.join("tests/lab/scenarios").join(format!("{n}.toml")))
            .collect()
    } else {
        scenarios.to_vec()
    };
    let kernels: Vec<Kernel> = if kernels.is_empty() {
        Kernel::ALL.to_vec()
    } else {
        kernels.to_vec()
    };
    let mut rows = vec![
        "| way | scenario | kernel | max error % | worst phase | oom_kills | ops/s per cgroup, last phase | plot |".to_owned(),
        "| --- | --- | --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    let mut all_ok = true;
    run_batch(&files, out, &kernels, |name, k, dir, report| match report {
        Ok(report) => {
            println!("\n{}", report.summary.table());
            rows.push(markdown_row(&report.summary, dir));
        }
        Err(e) => {
            all_ok = false;
            eprintln!("lab: {name} on {k} failed: {e:#}");
            rows.push(format!("| run failed | {name} | {k} | | | | | |"));
        }
    })?;
    println!("\n{}", rows.join("\n"));
    Ok(all_ok)
}

/// `cargo xtask lab judge`: with `run`, issue 19's batch on `k` into `out` (each pair's
/// kernel alone, then its daemon run, one at a time, the guest programs built once); then the
/// judged table of what `out` holds ([`judge`]).
pub fn lab_judge(out: &Path, k: Kernel, run: bool) -> Result<bool> {
    let ws = workspace();
    let dir_of = |stem: &str| out.join(format!("{stem}-{k}"));
    if run {
        let files: Vec<PathBuf> = judge::ISSUE19
            .iter()
            .flat_map(|p| [p.baseline, p.daemon])
            .map(|stem| ws.join("tests/lab/scenarios").join(format!("{stem}.toml")))
            .collect();
        run_batch(&files, out, &[k], |name, k, _, report| {
            if let Err(e) = report {
                // Judged below as missing; the other runs still go.
                eprintln!("lab: {name} on {k} failed: {e:#}");
            }
        })?;
    }
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    let mut missing = Vec::new();
    for pair in &judge::ISSUE19 {
        let read = |stem: &str| judge::Run::read(&dir_of(stem));
        match (read(pair.baseline), read(pair.daemon)) {
            (Ok(base), Ok(daemon)) => {
                let (r, v) = judge::judge(pair, &base, &daemon);
                rows.extend(r);
                verdicts.extend(v);
            }
            (b, d) => {
                let errors: Vec<String> = [b.err(), d.err()]
                    .into_iter()
                    .flatten()
                    .map(|e| format!("{e:#}"))
                    .collect();
                missing.push(format!(
                    "{}: {} (`--run` runs the batch)",
                    pair.label,
                    errors.join("; ")
                ));
            }
        }
    }
    println!("\n{}", judge::markdown(&rows));
    for v in &verdicts {
        println!(
            "{} {:<13} {}: {}",
            if v.pass { "PASS" } else { "FAIL" },
            v.label,
            v.bar,
            v.detail
        );
    }
    for m in &missing {
        println!("MISSING {m}");
    }
    Ok(missing.is_empty() && verdicts.iter().all(|v| v.pass))
}

fn markdown_row(s: &Summary, dir: &Path) -> String {
    let worst = s
        .phases
        .iter()
        .flat_map(|p| p.cgroups.iter().map(move |c| (p, c)))
        .filter_map(|(p, c)| c.error_pct.map(|e| (p, c, e)))
        .max_by(|a, b| a.2.abs().total_cmp(&b.2.abs()))
        .map_or_else(
            || "-".to_owned(),
            |(p, c, e)| {
                format!(
                    "{} {e:+.1}% in phase {} ({}-{}s)",
                    c.name, p.index, p.start, p.end
                )
            },
        );
    // Throughput under the heaviest pressure (the last phase) is what tells the ways apart;
    // the run-wide mean is dominated by the unpressured first phase.
    let last = s.phases.last();
    let ops: Vec<String> = s
        .cgroups
        .iter()
        .map(|c| {
            last.and_then(|p| p.cgroups.iter().find(|pc| pc.name == c.name))
                .and_then(|pc| pc.mean_ops_per_s)
                .map_or_else(|| "-".to_owned(), |o| format!("{o:.0}"))
        })
        .collect();
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        s.mode,
        s.scenario,
        s.kernel,
        s.max_error_pct
            .map_or_else(|| "n/a".to_owned(), |e| format!("{e:.1}")),
        worst,
        s.oom_kills,
        ops.join(" / "),
        dir.join("plot.svg").display()
    )
}

/// Drives the virtio-balloon over QMP by the guest's clock (the `t` of its samples): each
/// `[[balloon]]` step sets the guest's target to `ram − size`; the balloon's actual size is
/// recorded once per sample in `balloon.csv`.
struct BalloonDriver {
    path: PathBuf,
    ram: u64,
    steps: Vec<(u64, u64)>,
    next: usize,
    duration: f64,
    qmp: Option<qmp::Qmp>,
    last_t: f64,
    csv: String,
    trace: Vec<(f64, u64)>,
    errors: Vec<String>,
}

impl BalloonDriver {
    fn new(scenario: &Scenario, path: &Path) -> BalloonDriver {
        let mut steps: Vec<(u64, u64)> =
            scenario.balloon.iter().map(|b| (b.at, b.size.0)).collect();
        steps.sort_unstable();
        BalloonDriver {
            path: path.to_path_buf(),
            ram: scenario.ram.0,
            steps,
            next: 0,
            #[allow(clippy::cast_precision_loss)] // Seconds.
            duration: scenario.duration as f64,
            qmp: None,
            last_t: -1.0,
            csv: "t,target,actual\n".to_owned(),
            trace: Vec::new(),
            errors: Vec::new(),
        }
    }

    #[allow(clippy::cast_precision_loss)] // Seconds.
    fn at(&mut self, t: f64) {
        if self.steps.is_empty() || !self.errors.is_empty() || t <= self.last_t {
            return;
        }
        self.last_t = t;
        if self.qmp.is_none() {
            match qmp::Qmp::connect(&self.path, Duration::from_secs(5)) {
                Ok(q) => self.qmp = Some(q),
                Err(e) => {
                    self.errors.push(format!("balloon: {e:#}"));
                    return;
                }
            }
        }
        let Some(q) = self.qmp.as_mut() else { return };
        let mut target = None;
        if t >= self.duration && self.next <= self.steps.len() {
            // The scenario is over: give the guest its memory back so that collecting the
            // results (journal, files) does not crawl.
            self.next = self.steps.len() + 1;
            if let Err(e) = q.balloon(self.ram) {
                self.errors
                    .push(format!("deflating the balloon at {t:.0}s: {e:#}"));
            }
            return;
        }
        while let Some(&(at, size)) = self.steps.get(self.next) {
            if (at as f64) > t {
                break;
            }
            let goal = self.ram.saturating_sub(size);
            if let Err(e) = q.balloon(goal) {
                self.errors
                    .push(format!("balloon to {goal} at {t:.0}s: {e:#}"));
                return;
            }
            eprintln!("lab: balloon at {t:.0}s: takes {} MiB", size >> 20);
            target = Some(goal);
            self.next += 1;
        }
        match q.balloon_actual() {
            Ok(actual) => {
                self.trace.push((t, actual));
                let _ = writeln!(
                    self.csv,
                    "{t:.1},{},{actual}",
                    target.map_or_else(String::new, |g| g.to_string())
                );
            }
            Err(e) => self.errors.push(format!("query-balloon at {t:.0}s: {e:#}")),
        }
    }
}

/// What one run produced.
struct Report {
    summary: Summary,
    checks: Vec<Outcome>,
}

impl Report {
    fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }
}

fn print_checks(checks: &[Outcome]) {
    for c in checks {
        println!(
            "  [{}] {} — {}",
            if c.pass { "ok" } else { "FAIL" },
            c.check,
            c.detail
        );
    }
}

#[allow(clippy::too_many_arguments)] // One call site per verb; a struct would only rename them.
fn execute(
    lab: &Path,
    name: &str,
    text: &str,
    scenario: &Scenario,
    k: Kernel,
    kf: &KernelFiles,
    bins: &[PathBuf],
    out: &Path,
) -> Result<Report> {
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let stage = lab.join("stage").join(format!("{name}-{k}"));
    let initrd = lab.join("initrd").join(format!("{name}-{k}.cpio.gz"));
    fs::create_dir_all(lab.join("initrd")).context("cannot create target/lab/initrd")?;
    let host = scenario.guest == Guest::Host;
    let disk = if host {
        let kernels = Kernel::ALL
            .iter()
            .map(|&k| kernel::fetch(lab, k))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&KernelFiles> = kernels.iter().collect();
        let image = hostimg::ensure(lab, &refs)?;
        let payload = lab.join("payload").join(format!("{name}-{k}"));
        // A baseline based on a scenario with the daemon keeps its [daemon.config]: unused.
        let daemon_config = if !scenario.daemon.enabled || scenario.daemon.config.is_empty() {
            None
        } else {
            Some(
                toml::to_string(&scenario.daemon.config)
                    .context("cannot serialise [daemon.config]")?,
            )
        };
        let packages = match scenario.install {
            Install::Package => Some(lab_packages(lab)?),
            Install::Manual => None,
        };
        hostimg::stage_payload(
            &payload,
            &hostimg::Payload {
                workspace: &workspace(),
                binaries: bins,
                scenario_text: text,
                daemon_config,
                install: scenario.install,
                packages: packages
                    .as_ref()
                    .map(|p| (p.install.as_path(), p.upgrade.as_path())),
                zram: scenario.zram.0,
            },
        )?;
        Some((image, payload))
    } else {
        None
    };
    eprintln!(
        "lab: packing the initramfs for {name} on {k} ({})",
        kf.release
    );
    initramfs::build(
        &stage,
        &initrd,
        &match &disk {
            None => initramfs::Contents {
                binaries: bins,
                modules: &kf.modules,
                scenario: text,
                init: initramfs::INIT,
                payload: None,
            },
            Some((_, payload)) => initramfs::Contents {
                binaries: &[],
                modules: &kf.boot_modules,
                scenario: text,
                init: initramfs::HOST_INIT,
                payload: Some(payload),
            },
        },
    )?;
    // The host guest boots systemd and installs the daemon before its clock starts.
    let overhead = if host { 420 } else { 120 };
    let timeout = Duration::from_secs(scenario.duration + scenario.duration / 4 + overhead);
    let qmp_path =
        std::env::temp_dir().join(format!("mwlab-{}-{name}-{k}.qmp", std::process::id()));
    eprintln!(
        "lab: booting {} with {} RAM, {} CPUs (timeout {}s)",
        kf.release,
        scenario.ram,
        scenario.cpus,
        timeout.as_secs()
    );
    let tag = format!("[{k} {name}]");
    // Started before the boot so that it scrapes from the first second; killed when dropped.
    let prometheus = match (&scenario.prometheus, host) {
        (Some(spec), true) => Some(prom::Server::start(&workspace(), spec, &prom::dir(out))?),
        _ => None,
    };
    // The host's Unix time at the guest's second 0, from the latest sample (for alert times).
    let mut offset: Option<f64> = None;
    let mut attempt = 1;
    let (outcome, decoder, balloon) = loop {
        let mut balloon = BalloonDriver::new(scenario, &qmp_path);
        let mut decoder = Decoder::default();
        let mut last_t = f64::NAN;
        let outcome = vm::boot(
            &vm::Boot {
                kernel: kf.vmlinuz.clone(),
                initrd: initrd.clone(),
                ram_mib: scenario.ram.0 >> 20,
                cpus: scenario.cpus,
                timeout,
                console_log: out.join("console.log"),
                append: if host { vm::HOST_APPEND } else { vm::APPEND }.to_owned(),
                disk: disk.as_ref().map(|(image, _)| image.clone()),
                console2: host.then(|| out.join("kernel.log")),
                qmp: host.then(|| qmp_path.clone()),
                hostfwd: prometheus
                    .as_ref()
                    .map(|p| (p.scrape_port(), p.guest_port())),
            },
            |line| {
                if let Some(progress) = decoder.feed(line) {
                    println!("{tag} {progress}");
                }
                if let Some(t) = decoder.last_sample_t() {
                    balloon.at(t);
                    if t != last_t {
                        last_t = t;
                        offset = SystemTime::now()
                            .duration_since(UNIX_EPOCH)
                            .ok()
                            .map(|d| d.as_secs_f64() - t);
                    }
                }
            },
        )?;
        if !boot_panic_before_agent(&outcome, &decoder) || attempt == BOOT_ATTEMPTS {
            break (outcome, decoder, balloon);
        }
        // A kernel that panics before the agent's first record never ran our code: under TCG
        // with two vCPUs the guest kernel's own code patching (int3 while text_poke rewrites a
        // static call) rarely traps during boot (docs/lab.md, "Boot panics under TCG").
        let kept = out.join(format!("console-boot-panic-{attempt}.log"));
        let _ = fs::rename(out.join("console.log"), &kept);
        eprintln!(
            "lab: {name} on {k}: the guest kernel panicked while booting, before the agent \
             started (kept in {}); booting again ({}/{BOOT_ATTEMPTS})",
            kept.display(),
            attempt + 1
        );
        attempt += 1;
    };
    let _ = fs::remove_file(&qmp_path);
    fs::write(out.join("balloon.csv"), &balloon.csv)
        .with_context(|| format!("cannot write {}", out.join("balloon.csv").display()))?;
    let wall = outcome.wall.as_secs_f64();
    // An `end_when_done` run is judged on the seconds it ran.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Whole seconds ≥ 0.
    let ran = scenario.as_ran(decoder.last_sample_t().map(|t| t.max(0.0).floor() as u64));
    let scenario = &ran;
    // Write what arrived even if the run failed: it is what one debugs with.
    write_outputs(out, name, k, scenario, decoder.partial(), wall)?;
    let mut problems = Vec::new();
    if outcome.timed_out {
        problems.push(format!(
            "the guest hung: killed after {}s (see console.log)",
            timeout.as_secs()
        ));
    }
    if outcome.panicked {
        problems.push("the guest kernel panicked (see console.log)".to_owned());
    }
    problems.extend(balloon.errors);
    let results = match decoder.finish() {
        Ok(mut r) => {
            r.balloon = balloon.trace;
            Some(r)
        }
        Err(p) => {
            problems.extend(p);
            None
        }
    };
    let (Some(results), true) = (results, problems.is_empty()) else {
        bail!(
            "{name} on {k}: {}\nqemu: {}; last console lines:\n  {}",
            problems.join("\n  "),
            outcome.exit,
            outcome.tail.join("\n  ")
        );
    };
    let summary = summary::summarize(name, k.as_str(), scenario, &results, wall);
    // A baseline's run on this kernel sits beside this one's (`lab test`, `lab compare`).
    let baseline = |file: &str| {
        let stem = Path::new(file).file_stem()?.to_str()?;
        let dir = out.parent()?.join(format!("{stem}-{k}"));
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).ok()?).ok()
    };
    let mut checks = checks::evaluate(scenario, &results, &summary, &baseline);
    checks.extend(checks::promtool_scrapes(&out.join("commands")));
    if let (Some(server), Some(spec)) = (&prometheus, &scenario.prometheus) {
        checks.extend(server.judge(&workspace(), spec, offset, &prom::dir(out)));
    }
    drop(prometheus);
    let mut json = serde_json::to_value(&summary).context("cannot serialise the summary")?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert(
            "checks".into(),
            serde_json::to_value(&checks).context("cannot serialise the checks")?,
        );
    }
    let summary_path = out.join("summary.json");
    fs::write(
        &summary_path,
        serde_json::to_string_pretty(&json).context("cannot serialise the summary")?,
    )
    .with_context(|| format!("cannot write {}", summary_path.display()))?;
    plot::write(&out.join("plot.svg"), scenario, &results, &summary)?;
    write_timeseries(
        &out.join("timeseries.csv"),
        scenario,
        &results,
        Some(&summary),
    )?;
    Ok(Report { summary, checks })
}

/// How often a guest may be booted for one run when its kernel panics before the agent starts.
const BOOT_ATTEMPTS: u32 = 3;

/// True when the guest kernel panicked before the agent's first record: a boot failure of the
/// emulated machine, not a result of the run.
fn boot_panic_before_agent(outcome: &vm::Outcome, decoder: &Decoder) -> bool {
    outcome.panicked && decoder.partial().hello.is_none()
}

fn safe_relative(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    p.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| p.to_path_buf())
}

fn write_outputs(
    out: &Path,
    name: &str,
    k: Kernel,
    scenario: &Scenario,
    results: &Results,
    wall: f64,
) -> Result<()> {
    for (file, text) in &results.files {
        let Some(rel) = safe_relative(file) else {
            eprintln!("lab: ignoring guest file with an unsafe name {file:?}");
            continue;
        };
        let path = out.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if scenario.daemon.enabled && !results.files.contains_key("daemon.log") {
        fs::write(out.join("daemon.log"), "")
            .with_context(|| format!("cannot write {}", out.join("daemon.log").display()))?;
    }
    let events: String = results
        .events
        .iter()
        .map(|e| {
            format!(
                "{:>7.1} {:<15} {} {}\n",
                e.t,
                e.kind,
                if e.ok { "ok  " } else { "FAIL" },
                e.detail
            )
        })
        .collect();
    fs::write(out.join("events.txt"), events).context("cannot write events.txt")?;
    write_timeseries(&out.join("timeseries.csv"), scenario, results, None)?;
    let _ = (name, k, wall);
    Ok(())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// `text` as one CSV field: quoted, its quotes doubled, when it holds a comma, a quote or a
/// line break (a cgroup's name may).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn write_timeseries(
    path: &Path,
    scenario: &Scenario,
    results: &Results,
    summary: Option<&Summary>,
) -> Result<()> {
    let mut csv = String::from(
        "t,cgroup,weight,present,current,high,low,swap,psi_some10,psi_full10,ops_per_s,\
         events_high,events_max,events_oom_kill,target,host_mem_available,host_swap_used,\
         host_psi_some10,host_psi_full10,pressure_size,pressure_current,daemon_alive,host_mem_free,\
         daemon_cpu_usec,kswapd_cpu_usec,d_usage,d_target,d_entitlement,d_ceiling,d_trim,d_refaulted,\
         d_capacity,d_enforcing,d_reclaiming,refaults,majfaults,d_yielding,d_outside_stall,\
         d_outside_stall_by\n",
    );
    for s in &results.samples {
        let pool = s.daemon_pool.as_ref();
        for (i, c) in s.cgroups.iter().enumerate() {
            let weight = scenario.cgroups.get(i).map_or(0, |c| c.weight);
            let target = summary.and_then(|sm| {
                sm.phases
                    .iter()
                    .find(|p| {
                        #[allow(clippy::cast_precision_loss)] // Seconds.
                        let (a, b) = (p.start as f64, p.end as f64);
                        s.t >= a && s.t < b
                    })
                    .and_then(|p| p.cgroups.iter().find(|pc| pc.name == c.name))
                    .map(|pc| pc.target)
            });
            let _ = writeln!(
                csv,
                "{:.2},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                s.t,
                c.name,
                weight,
                c.present,
                opt(c.current),
                opt(c.high),
                opt(c.low),
                opt(c.swap),
                opt(c.psi_some10),
                opt(c.psi_full10),
                opt(c.ops_per_s.map(|o| format!("{o:.1}"))),
                opt(c.events_high),
                opt(c.events_max),
                opt(c.events_oom_kill),
                opt(target),
                opt(s.host.mem_available),
                opt(s.host.swap_used),
                opt(s.host.psi_some10),
                opt(s.host.psi_full10),
                s.pressure_size,
                opt(s.pressure_current),
                opt(s.daemon_alive),
                opt(s.host.mem_free),
                opt(s.daemon_cpu_usec),
                opt(s.kswapd_cpu_usec),
                opt(c.daemon.map(|d| d.usage)),
                opt(c.daemon.map(|d| d.target)),
                opt(c.daemon.map(|d| d.entitlement)),
                // No ceiling is `max`; no view at all, empty.
                opt(c.daemon.map(|d| d
                    .ceiling
                    .map_or_else(|| "max".to_owned(), |b| b.to_string()))),
                opt(c.daemon.and_then(|d| d.trim)),
                opt(c.daemon.and_then(|d| d.refaulted)),
                opt(pool.map(|p| p.capacity)),
                opt(pool.map(|p| p.enforcing)),
                opt(pool.map(|p| p.reclaiming)),
                opt(c.refaults),
                opt(c.majfaults),
                opt(pool.map(|p| p.yielding)),
                opt(pool.and_then(|p| p.outside_stall)),
                opt(pool.and_then(|p| p.outside_stall_by.as_deref().map(csv_field))),
            );
        }
    }
    fs::write(path, csv).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests;
