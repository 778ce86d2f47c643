#!/bin/bash
# Footprint of the release daemon on a tmpfs fake tree of N glob-matched cgroups (one in ten
# busy): time to the first state save (adoption), CPU per 1 s tick over ~10 ticks while the
# level moves (MemAvailable flips every 0.5 s), peak/current RSS, open fds, threads, and the
# time SIGTERM takes to restore everything. See docs/benchmarks.md.
#
#   cargo build --release -j2 -p memweightd
#   crates/memweightd/benches/footprint.sh 1000
#   crates/memweightd/benches/footprint.sh 10000
set -euo pipefail
N=${1:-1000}
BIN=${MEMWEIGHTD:-$(dirname "$0")/../../../target/release/memweightd}
D=$(mktemp -d /dev/shm/mwfoot.XXXX)
trap 'rm -rf "$D"' EXIT
python3 - "$D/cg" "$N" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
stat = ("anon {a}\nfile {f}\nkernel 2097152\nshmem 0\nfile_mapped 0\nfile_dirty 0\n"
        "file_writeback 0\ninactive_anon {ia}\nactive_anon {aa}\ninactive_file {i_f}\n"
        "active_file {af}\nunevictable 0\nslab_reclaimable 1048576\nslab_unreclaimable 524288\n"
        "slab 1572864\nworkingset_refault_anon 0\nworkingset_refault_file 0\npgscan 0\n"
        "pgsteal 0\npgfault 0\npgmajfault 0\n")
psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
def mk(d, usage):
    os.makedirs(d, exist_ok=True)
    a, f = usage * 3 // 4, usage // 4
    files = {
        "cgroup.controllers": "memory\n", "cgroup.subtree_control": "memory\n",
        "memory.current": f"{usage}\n",
        "memory.stat": stat.format(a=a, f=f, ia=a // 2, aa=a - a // 2, i_f=f // 2, af=f - f // 2),
        "memory.pressure": psi,
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "memory.high": "max\n", "memory.low": "0\n", "memory.min": "0\n", "memory.max": "max\n",
        "memory.swap.current": "0\n", "memory.swap.max": "max\n", "memory.reclaim": "",
    }
    for k, v in files.items():
        with open(os.path.join(d, k), "w") as fh:
            fh.write(v)
mk(root, 0)
mk(os.path.join(root, "pods"), 0)
for i in range(n):
    busy = i % 10 == 0
    mk(os.path.join(root, "pods", f"c{i:05}"), (1024 + (i * 37) % 1024) << 20 if busy else (1 + i % 7) << 20)
PY
mkdir -p "$D/proc/pressure"
# A reserve of 40 GiB per 1,000 cgroups (about a quarter of what they hold); MemAvailable
# flips between none and a quarter of it, so the pool is squeezed and the level moves.
reserve_kb=$((40 * 1024 * 1024 * N / 1000))
meminfo() { # MemAvailable in kB; the other keys a 6.x kernel prints
    printf 'MemTotal:       17179869184 kB\nMemFree:        %s kB\nMemAvailable:   %s kB\nBuffers:           1024 kB\nCached:          524288 kB\nSwapCached:            0 kB\nActive:          262144 kB\nInactive:        262144 kB\nActive(anon):     65536 kB\nInactive(anon):   65536 kB\nActive(file):    196608 kB\nInactive(file):  196608 kB\nUnevictable:           0 kB\nMlocked:               0 kB\nSwapTotal:      4194304 kB\nSwapFree:       4194304 kB\nZswap:                 0 kB\nZswapped:              0 kB\nDirty:                 0 kB\nWriteback:             0 kB\nAnonPages:        131072 kB\nMapped:            65536 kB\nShmem:              4096 kB\nKReclaimable:      32768 kB\nSlab:              65536 kB\nSReclaimable:      32768 kB\nSUnreclaim:        32768 kB\nKernelStack:        8192 kB\nPageTables:         4096 kB\nSecPageTables:         0 kB\nNFS_Unstable:          0 kB\nBounce:                0 kB\nWritebackTmp:          0 kB\nCommitLimit:    8388608 kB\nCommitted_AS:    1048576 kB\nVmallocTotal:   34359738367 kB\nVmallocUsed:       32768 kB\nVmallocChunk:          0 kB\nPercpu:             2048 kB\nHardwareCorrupted:     0 kB\nAnonHugePages:         0 kB\nShmemHugePages:        0 kB\nShmemPmdMapped:        0 kB\nFileHugePages:         0 kB\nFilePmdMapped:         0 kB\nHugePages_Total:       0\nHugePages_Free:        0\nHugePages_Rsvd:        0\nHugePages_Surp:        0\nHugepagesize:       2048 kB\nHugetlb:               0 kB\nDirectMap4k:      262144 kB\nDirectMap2M:    16515072 kB\n' "$1" "$1" >"$D/proc/meminfo.new"
    mv "$D/proc/meminfo.new" "$D/proc/meminfo"
}
meminfo 0
printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n' >"$D/proc/pressure/memory"
cat >"$D/mw.toml" <<EOT
cgroup_root = "$D/cg"
proc_root = "$D/proc"
state_dir = "$D/state"
tick = "1s"
control = { socket = "$D/mw.sock" }
metrics = { enabled = false }
[capacity]
reserve = $((reserve_kb * 1024))
psi_threshold = 0.0
[[cgroup]]
glob = "pods/*"
EOT
t0=$(date +%s.%N)
"$BIN" --config "$D/mw.toml" 2>"$D/log" &
pid=$!
while [ ! -s "$D/state/state.json" ]; do
    kill -0 "$pid" 2>/dev/null || { cat "$D/log"; exit 1; }
    sleep 0.02
done
t1=$(date +%s.%N)
sleep 2
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
for i in $(seq 1 20); do
    sleep 0.5
    if [ $((i % 2)) = 0 ]; then a=0; else a=$((reserve_kb / 4)); fi
    meminfo "$a"
done
sleep 0.5
read -r u2 s2 < <(awk '{print $14, $15}' "/proc/$pid/stat")
hz=$(getconf CLK_TCK)
echo "n=$N first_save_s=$(echo "$t1 - $t0" | bc)" \
    "cpu_ms_per_tick=$(echo "($u2 + $s2 - $u1 - $s1) * 1000 / $hz / 10.5" | bc)" \
    "$(grep -E 'VmHWM|VmRSS' "/proc/$pid/status" | tr -s ' \t' ' ' | tr '\n' ' ')" \
    "fds=$(ls "/proc/$pid/fd" | wc -l) threads=$(ls "/proc/$pid/task" | wc -l)"
echo "limited=$(grep -L '^max$' "$D"/cg/pods/*/memory.high | wc -l)/$N"
t2=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid"
t3=$(date +%s.%N)
echo "sigterm_s=$(echo "$t3 - $t2" | bc)" \
    "restored=$(grep -l '^max$' "$D"/cg/pods/*/memory.high | wc -l)/$N"
grep -E 'restoring original limits|released every|WARN|ERROR' "$D/log" | tail -4 | cut -c1-220
