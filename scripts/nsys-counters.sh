#!/usr/bin/env bash
# CPU and I/O on the Nsight Systems timeline (laptime/counters.hpp, docs/resources.md), proven with nsys:
# builds a small program with the counters on, runs it under `nsys profile -t nvtx`, exports the
# report to SQLite and reads the counters back. Prints a short table last.
#
#   scripts/nsys-counters.sh [--iters 20] [--hz 20]
#
# The program tracks three names (Stopwatch::track_cpu_usage) in each iteration: "busy" spins for
# 50 ms, "idle" sleeps 50 ms, "write" writes 16 MiB to a file on disk and fsyncs it; and
# enable_nvtx_counters(hz) adds the background sampler's four process-tree counters. Each tracked
# name gets four counters ("<name>: process tree CPU" and "<name>: system CPU" in %, "<name>: read"
# and "<name>: write" in MB/s), published at the end of each of its intervals.
#
# Where nsys keeps them: Nsight Systems 2025.3.1 (the H200's) as generic events (GENERIC_EVENT_TYPES
# names each counter, GENERIC_EVENTS / GENERIC_EVENT_DATA hold its samples); nsys's storage_util
# recipe reads NVTX_COUNTER_GROUPS, which lists the counters (domainId, counterGroupId, name),
# and each counter's samples are in the table NVTX_COUNTER_SAMPLES_<domainId>_<counterGroupId>
# (a timestamp and the value). If this nsys writes neither, the script lists every table whose
# name has COUNTER or NVTX in it and dumps their first rows, so that the next run can be fixed.
#
# A tool that takes no counters (Nsight Systems 2025.3.1 writes no counter table) gets each figure
# as an NVTX mark named after its counter with the value as a double payload
# (NVTX_EVENTS.doubleValue): the script reads those where no counter table is there.
#
# Checks: the Stopwatch's intervals are NVTX ranges of their names (set_nvtx_ranges), "spin"
# nested in "busy"; the 16 counters are there; busy/idle/write have one sample per iteration; "busy"'s
# process-tree CPU is more than 3x "idle"'s; "write: write" is above 0 MB/s; the sampler published.
# nsys's importer needs libdw: Debian's .debs in .debs/ are unpacked as scripts/gpu-check.sh does.
# Output (report, sqlite, logs) goes to $OUT (the device tool's output folder) or
# /tmp/laptime-nsys-counters. Exit status: 0 if every check passed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${OUT:-/tmp/laptime-nsys-counters}
DEPS=${DEPS:-/tmp/deps}
ITERS=20
HZ=20
while [ $# -gt 0 ]; do
  case $1 in
    --iters) ITERS=$2; shift 2 ;;
    --hz) HZ=$2; shift 2 ;;
    *) echo "usage: see the top of $0" >&2; exit 2 ;;
  esac
done
mkdir -p "$WORK" "$DEPS"
PY=${PYTHON:-python3}

# ---------------------------------------------------------------- tools
source "$ROOT/scripts/nsight-tools.sh"  # NSYS
echo "nsys: ${NSYS:-not found}"
if [ -z "${NSYS:-}" ]; then
  echo "nsys-counters.sh: nsys not found (set NSYS=/path/to/nsys)" >&2
  exit 1
fi
if compgen -G "$ROOT/.debs/*.deb" >/dev/null; then
  for f in "$ROOT"/.debs/*.deb; do dpkg -x "$f" "$DEPS"; done
fi
DEPS_LIB="$DEPS/usr/lib/x86_64-linux-gnu"
nsys_() { LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$NSYS" "$@"; }
"$NSYS" --version 2>/dev/null | head -1

# ---------------------------------------------------------------- the program
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
cat >"$WORK/counters_app.cpp" <<'EOF'
// Three tracked names with known CPU and I/O, their figures as NVTX counters; every interval is
// also an NVTX range of its name (set_nvtx_ranges: no range_push written by hand), "spin" nested
// in "busy".
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <laptime/laptime.hpp>

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const double hz = argc > 2 ? std::atof(argv[2]) : 20;
  const std::string file = argc > 3 ? argv[3] : "counters-app.bin";
  auto& sw = laptime::Stopwatch::instance();
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  for (const char* n : {"busy", "idle", "write"}) sw.track_cpu_usage(n);
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  laptime::enable_nvtx_counters(hz);
  const std::string block(16 << 20, 'w');
  for (int i = 0; i < iters; ++i) {
    {
      sw.start_meas("busy");
      sw.start_meas("spin");
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      volatile unsigned long sink = 0;
      while (std::chrono::steady_clock::now() < until) sink = sink + 1;
      sw.end_meas("spin");
      sw.end_meas("busy");
    }
    {
      sw.start_meas("idle");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      sw.end_meas("idle");
    }
    {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      sw.start_meas("write");
      const bool ok = fd >= 0 && ::write(fd, block.data(), block.size()) ==
                                     static_cast<ssize_t>(block.size()) && ::fsync(fd) == 0;
      sw.end_meas("write");
      if (fd >= 0) ::close(fd);
      if (!ok) std::perror("write");
    }
    sw.finish_iter();
  }
  ::unlink(file.c_str());
  laptime::disable_nvtx_counters();
  sw.print_eval_times();
  return 0;
}
EOF
echo "building counters_app"
if ! g++ -std=c++17 -O2 -I"$ROOT/include" -I"$CUDA_INC" "$WORK/counters_app.cpp" \
  -o "$WORK/counters_app" -pthread -ldl >"$WORK/build.log" 2>&1; then
  cat "$WORK/build.log"
  echo "nsys-counters.sh: the program did not build" >&2
  exit 1
fi

# ---------------------------------------------------------------- profile, export
REP="$WORK/counters"
rm -f "$REP.nsys-rep" "$REP.sqlite"
echo "nsys profile -t nvtx ($ITERS iterations, sampler at $HZ Hz)"
nsys_ profile -t nvtx --sample=none --cpuctxsw=none -o "$REP" --force-overwrite true \
  "$WORK/counters_app" "$ITERS" "$HZ" "$WORK/counters-app.bin" >"$WORK/profile.log" 2>&1
profiled=$?
tail -n 25 "$WORK/profile.log"
nsys_ export --type sqlite -o "$REP.sqlite" --force-overwrite true "$REP.nsys-rep" \
  >"$WORK/export.log" 2>&1
exported=$?
tail -n 3 "$WORK/export.log"

# ---------------------------------------------------------------- read the counters back
"$PY" - "$REP.sqlite" "$ITERS" "$profiled" "$exported" <<'EOF'
import sqlite3, statistics, sys

path, iters, profiled, exported = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rows = []  # (check, result, numbers)
def row(check, ok, numbers):
    rows.append((check, "PASS" if ok else "FAIL", numbers))

row("nsys profile, export", profiled == 0 and exported == 0,
    f"profile exit {profiled}, export exit {exported}")
try:
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
except Exception as e:  # no report: nothing more to read
    tables = []
    print(f"cannot open {path}: {e}")

def columns(table):
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]

samples = {}  # counter name -> [values]
if "NVTX_COUNTER_GROUPS" in tables:
    cols = columns("NVTX_COUNTER_GROUPS")
    print("NVTX_COUNTER_GROUPS columns:", ", ".join(cols))
    domains = {}
    if "NVTX_DOMAINS" in tables:  # best effort: the domain's name for the printout
        dcols = columns("NVTX_DOMAINS")
        print("NVTX_DOMAINS columns:", ", ".join(dcols))
    # Column names as nsys's own recipes read them; another nsys may spell them otherwise.
    pick = lambda *names: next((c for n in names for c in cols if c.lower() == n.lower()), None)
    dcol, gcol, ncol = pick("domainId"), pick("counterGroupId", "counterId", "id"), pick("name")
    if not (dcol and gcol and ncol):
        print("NVTX_COUNTER_GROUPS has unexpected columns; its rows:")
        for r in db.execute("SELECT * FROM NVTX_COUNTER_GROUPS LIMIT 20"):
            print("   ", r)
    groups = db.execute(f'SELECT "{dcol}", "{gcol}", "{ncol}" FROM NVTX_COUNTER_GROUPS').fetchall() \
        if dcol and gcol and ncol else []
    for domain, gid, name in groups:
        table = f"NVTX_COUNTER_SAMPLES_{domain}_{gid}"
        if table not in tables:
            near = [t for t in tables if t.startswith("NVTX_COUNTER_SAMPLES")][:5]
            print(f"counter {name!r}: no table {table} (sample tables: {near})")
            samples[name] = []
            continue
        scols = columns(table)
        values = [c for c in scols if c.lower() not in ("timestamp", "id", "rowid")]
        print(f"counter {name!r} (domain {domain}, id {gid}): {table} columns {scols}")
        vals = []
        for r in db.execute(f'SELECT * FROM "{table}" ORDER BY 1'):
            rec = dict(zip(scols, r))
            v = rec.get(values[0]) if values else None
            vals.append(v)
        samples[name] = vals
        for r in db.execute(f'SELECT * FROM "{table}" ORDER BY 1 LIMIT 3'):
            print("   ", r)
else:
    print("no NVTX_COUNTER_GROUPS table; tables with COUNTER or NVTX in their names:")
    for t in tables:
        if "COUNTER" in t.upper() or "NVTX" in t.upper():
            n = db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            print(f"  {t} ({n} rows): {columns(t)}")
            for r in db.execute(f'SELECT * FROM "{t}" LIMIT 5'):
                print("     ", r)

# Nsight Systems 2025.3.1 writes NVTX counters as generic events: one GENERIC_EVENT_TYPES row per
# counter (its name in StringIds), its samples in GENERIC_EVENTS with the value in
# GENERIC_EVENT_DATA (field 0, doubleVal).
if not samples and {"GENERIC_EVENT_TYPES", "GENERIC_EVENTS", "GENERIC_EVENT_DATA",
                    "StringIds"} <= set(tables):
    names = dict(db.execute("SELECT t.typeId, s.value FROM GENERIC_EVENT_TYPES t "
                            "JOIN StringIds s ON t.nameId = s.id"))
    for tid, value in db.execute(
            "SELECT e.typeId, d.doubleVal FROM GENERIC_EVENTS e JOIN GENERIC_EVENT_DATA d "
            "ON d.genericEventId = e.genericEventId AND d.fieldIdx = 0 ORDER BY e.timestamp"):
        samples.setdefault(names.get(tid, str(tid)), []).append(value)
    if samples:
        print("counters as nsys generic events:", {k: len(v) for k, v in samples.items()})
        for k in list(samples)[:4]:
            print(f"   {k!r}: {[round(v, 2) for v in samples[k][:5] if v is not None]}")
generic = bool(samples)

# laptime's fallback where the tool takes no counters (Nsight Systems 2025.3.1 records none):
# each figure is an NVTX mark named after its counter, carrying the value as a double payload.
via = "generic events (GENERIC_EVENTS)" if generic else "counters" if samples else "none"
ecols = columns("NVTX_EVENTS") if "NVTX_EVENTS" in tables else []
has_ids = "StringIds" in tables and "textId" in ecols
text = "COALESCE(e.text, s.value)" if has_ids else "e.text"
join = "LEFT JOIN StringIds s ON e.textId = s.id" if has_ids else ""
if not samples and "doubleValue" in ecols:
    for name, value in db.execute(
            f"SELECT {text}, e.doubleValue FROM NVTX_EVENTS e {join} "
            "WHERE e.end IS NULL AND e.doubleValue IS NOT NULL ORDER BY e.start"):
        samples.setdefault(name, []).append(value)
    if samples:
        via = "marks with values"
        print("counter figures as marks:", {k: len(v) for k, v in samples.items()})
        for k in list(samples)[:4]:
            print(f"   {k!r}: {samples[k][:5]}")

def numeric(vs):
    return [float(v) for v in vs if isinstance(v, (int, float))]

expected = [f"{n}: {f}" for n in ("busy", "idle", "write")
            for f in ("process tree CPU", "system CPU", "read", "write")]
expected += ["process tree CPU", "system CPU", "read", "write"]
missing = [e for e in expected if e not in samples]
row("16 counters on the timeline", not missing,
    f"{len(samples)} counters, as {via}" + (f"; missing {missing}" if missing else ""))
for name in ("busy: process tree CPU", "idle: process tree CPU", "write: write"):
    n = len(samples.get(name, []))
    row(f"'{name}' samples", n == iters, f"{n} of {iters}")
busy = numeric(samples.get("busy: process tree CPU", []))
idle = numeric(samples.get("idle: process tree CPU", []))
if busy and idle:
    b, i = statistics.median(busy), statistics.median(idle)
    row("busy > 3x idle (process tree CPU, median %)", b > 3 * i, f"busy {b:.2f} %, idle {i:.2f} %")
else:
    row("busy > 3x idle (process tree CPU, median %)", False, "no samples")
write = numeric(samples.get("write: write", []))
if write:
    w = statistics.median(write)
    row("write: write > 0 (median MB/s)", w > 0, f"{w:.0f} MB/s (16 MiB + fsync per interval)")
else:
    row("write: write > 0 (median MB/s)", False, "no samples")
sampled = numeric(samples.get("process tree CPU", []))
row("background sampler samples", len(sampled) > 0,
    f"{len(sampled)} samples, median {statistics.median(sampled) if sampled else 0:.2f} %")

# The Stopwatch's intervals as NVTX ranges (set_nvtx_ranges): one range per interval, named as
# the interval, "spin" inside "busy".
ranges = {}
if "NVTX_EVENTS" in tables:
    for name, start, end in db.execute(
            f"SELECT {text}, e.start, e.end FROM NVTX_EVENTS e {join} WHERE e.end IS NOT NULL"):
        ranges.setdefault(name, []).append((start, end))
    print("NVTX ranges:", {k: len(v) for k, v in ranges.items()})
for name in ("busy", "spin", "idle", "write"):
    n = len(ranges.get(name, []))
    row(f"range '{name}' from the Stopwatch (unified)", n == iters, f"{n} of {iters}")
busy_r, spin_r = sorted(ranges.get("busy", [])), sorted(ranges.get("spin", []))
nested = bool(busy_r) and len(busy_r) == len(spin_r) and all(
    b0 <= s0 and s1 <= b1 for (b0, b1), (s0, s1) in zip(busy_r, spin_r))
row("'spin' nested in 'busy'", nested,
    f"median busy {statistics.median([e - s for s, e in busy_r]) / 1e6:.1f} ms" if busy_r else "none")

print()
print(f"{'check':48} {'result':6} numbers")
for check, result, numbers in rows:
    print(f"{check:48} {result:6} {numbers}")
sys.exit(0 if all(r[1] == "PASS" for r in rows) else 1)
EOF
