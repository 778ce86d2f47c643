#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 20) each and fails on any crash, panic, hang
# (a single input over 10 s) or OOM (over 2 GiB). Works on stable Rust: libFuzzer comes from
# the libfuzzer-sys crate (built with the system C++ compiler) and the coverage
# instrumentation from stable -C flags, so neither nightly nor cargo-fuzz is needed.
#
#   bash fuzz/run.sh            # 20 s per target
#   bash fuzz/run.sh 600        # 10 min per target
#   TARGETS="config state" bash fuzz/run.sh 60     # builds and runs only these
#   FUZZ_JOBS=1 bash fuzz/run.sh                   # build with one job (default 2)
#
# The corpus grows in fuzz/corpus/<target> (not committed; seeded from fuzz/seeds/<target>).
# A crash leaves its input in fuzz/artifacts/<target>/; replay it with
#   fuzz/target/x86_64-unknown-linux-gnu/release/<target> fuzz/artifacts/<target>/crash-…
set -euo pipefail
cd "$(dirname "$0")"

seconds=${1:-20}
triple=$(rustc -vV | sed -n 's/^host: //p')
all_targets="config ctl_request engine_list engine_inspect labels memory_stat memory_events pressure single_values meminfo plan state zoneinfo"
targets=${TARGETS:-$all_targets}
target_dir=${CARGO_TARGET_DIR:-target}

# What cargo-fuzz passes, on stable: sancov edge coverage with inline 8-bit counters and a PC
# table (what libFuzzer reads), comparison tracing, and debug assertions + overflow checks so
# an arithmetic overflow is a crash. `--target` keeps the flags off build scripts and proc
# macros, which cannot link the sancov runtime.
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
-Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions -Coverflow-checks"
echo "==> building fuzz targets ($triple)"
# No --locked: the workspace crates' dependencies move with the main Cargo.lock, and a stale
# fuzz/Cargo.lock must not fail CI; cargo updates only what changed.
bins=()
for t in $targets; do bins+=(--bin "$t"); done
cargo build --release "${bins[@]}" --target "$triple" -j"${FUZZ_JOBS:-2}"

failed=()
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    log="artifacts/$t/last-run.log"
    echo "==> $t: ${seconds}s"
    if "$target_dir/$triple/release/$t" "corpus/$t" "seeds/$t" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        echo "    ok: ${runs:-?} executions, corpus $(find "corpus/$t" -type f | wc -l) files"
    else
        echo "    FAILED: see fuzz/$log"
        grep -E "panicked|ERROR|SUMMARY|Test unit written" "$log" | head -20 | sed 's/^/    /'
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found problems in: ${failed[*]}" >&2
    exit 1
fi
echo "fuzzing: all $(echo "$targets" | wc -w) targets clean"
