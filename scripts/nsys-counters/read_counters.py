"""Reads counters_app's NVTX counters and ranges back from an Nsight Systems report exported to
SQLite, checks them and prints a table of checks last; exits 1 if any check failed.

    python3 scripts/nsys-counters/read_counters.py REPORT.sqlite ITERS PROFILE_RC EXPORT_RC

ITERS is the number of iterations counters_app ran; PROFILE_RC and EXPORT_RC are the exit statuses
of `nsys profile` and `nsys export` (scripts/nsys-counters.sh passes them, so that the table has
them too). The counters are looked for where nsys may keep them, first found first:

- NVTX_COUNTER_GROUPS lists the counters (domainId, counterGroupId, name) and each counter's samples
  are in NVTX_COUNTER_SAMPLES_<domainId>_<counterGroupId>, as nsys's storage_util recipe reads them;
- generic events: one GENERIC_EVENT_TYPES row per counter (its name in StringIds), its samples in
  GENERIC_EVENTS with the value in GENERIC_EVENT_DATA (field 0, doubleVal);
- laptime's fallback where the tool takes no counters: each figure is an NVTX mark named after its
  counter, with the value as a double payload (NVTX_EVENTS.doubleValue).

Where there is no counter table, the tables with COUNTER or NVTX in their names are dumped, so that
a run against another nsys shows where that one keeps them.
"""

import sqlite3
import statistics
import sys

TRACKED = ("busy", "idle", "write")
FIGURES = ("process tree CPU", "system CPU", "read", "write")


def columns(db, table):
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


def counter_group_columns(db):
    """The domain, group and name columns of NVTX_COUNTER_GROUPS, as nsys's own recipes name them
    (another nsys may spell them otherwise: None where not found)."""
    cols = columns(db, "NVTX_COUNTER_GROUPS")
    print("NVTX_COUNTER_GROUPS columns:", ", ".join(cols))

    def pick(*names):
        return next((c for n in names for c in cols if c.lower() == n.lower()), None)

    return pick("domainId"), pick("counterGroupId", "counterId", "id"), pick("name")


def from_counter_groups(db, tables):
    """{counter name: [values]} from NVTX_COUNTER_GROUPS and its sample tables."""
    dcol, gcol, ncol = counter_group_columns(db)
    if "NVTX_DOMAINS" in tables:  # best effort: the domain's columns for the printout
        print("NVTX_DOMAINS columns:", ", ".join(columns(db, "NVTX_DOMAINS")))
    if not (dcol and gcol and ncol):
        print("NVTX_COUNTER_GROUPS has unexpected columns; its rows:")
        for r in db.execute("SELECT * FROM NVTX_COUNTER_GROUPS LIMIT 20"):
            print("   ", r)
        return {}
    samples = {}
    for domain, gid, name in db.execute(
            f'SELECT "{dcol}", "{gcol}", "{ncol}" FROM NVTX_COUNTER_GROUPS').fetchall():
        table = f"NVTX_COUNTER_SAMPLES_{domain}_{gid}"
        if table not in tables:
            near = [t for t in tables if t.startswith("NVTX_COUNTER_SAMPLES")][:5]
            print(f"counter {name!r}: no table {table} (sample tables: {near})")
            samples[name] = []
            continue
        scols = columns(db, table)
        values = [c for c in scols if c.lower() not in ("timestamp", "id", "rowid")]
        print(f"counter {name!r} (domain {domain}, id {gid}): {table} columns {scols}")
        rows = db.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
        samples[name] = [dict(zip(scols, r)).get(values[0]) if values else None for r in rows]
        for r in rows[:3]:
            print("   ", r)
    return samples


def dump_counter_tables(db, tables):
    print("no NVTX_COUNTER_GROUPS table; tables with COUNTER or NVTX in their names:")
    for t in tables:
        if "COUNTER" in t.upper() or "NVTX" in t.upper():
            n = db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0]
            print(f"  {t} ({n} rows): {columns(db, t)}")
            for r in db.execute(f'SELECT * FROM "{t}" LIMIT 5'):
                print("     ", r)


def from_generic_events(db, tables):
    """{counter name: [values]} from nsys's generic events (Nsight Systems 2025.3.1's way)."""
    if not {"GENERIC_EVENT_TYPES", "GENERIC_EVENTS", "GENERIC_EVENT_DATA",
            "StringIds"} <= set(tables):
        return {}
    names = dict(db.execute("SELECT t.typeId, s.value FROM GENERIC_EVENT_TYPES t "
                            "JOIN StringIds s ON t.nameId = s.id"))
    samples = {}
    for tid, value in db.execute(
            "SELECT e.typeId, d.doubleVal FROM GENERIC_EVENTS e JOIN GENERIC_EVENT_DATA d "
            "ON d.genericEventId = e.genericEventId AND d.fieldIdx = 0 ORDER BY e.timestamp"):
        samples.setdefault(names.get(tid, str(tid)), []).append(value)
    if samples:
        print("counters as nsys generic events:", {k: len(v) for k, v in samples.items()})
        for k in list(samples)[:4]:
            print(f"   {k!r}: {[round(v, 2) for v in samples[k][:5] if v is not None]}")
    return samples


def nvtx_text(db, tables):
    """The SQL for an NVTX event's name (its text, or its StringIds entry) and the join it needs."""
    ecols = columns(db, "NVTX_EVENTS") if "NVTX_EVENTS" in tables else []
    if "StringIds" in tables and "textId" in ecols:
        return "COALESCE(e.text, s.value)", "LEFT JOIN StringIds s ON e.textId = s.id"
    return "e.text", ""


def from_marks(db, tables):
    """{counter name: [values]} from NVTX marks that carry a double payload (laptime's fallback)."""
    if "NVTX_EVENTS" not in tables or "doubleValue" not in columns(db, "NVTX_EVENTS"):
        return {}
    text, join = nvtx_text(db, tables)
    samples = {}
    for name, value in db.execute(
            f"SELECT {text}, e.doubleValue FROM NVTX_EVENTS e {join} "
            "WHERE e.end IS NULL AND e.doubleValue IS NOT NULL ORDER BY e.start"):
        samples.setdefault(name, []).append(value)
    if samples:
        print("counter figures as marks:", {k: len(v) for k, v in samples.items()})
        for k in list(samples)[:4]:
            print(f"   {k!r}: {samples[k][:5]}")
    return samples


def read_counters(db, tables):
    """({counter name: [values]}, where they were found)."""
    samples = {}
    if "NVTX_COUNTER_GROUPS" in tables:
        samples = from_counter_groups(db, tables)
        if samples:
            return samples, "counters"
    else:
        dump_counter_tables(db, tables)
    samples = from_generic_events(db, tables)
    if samples:
        return samples, "generic events (GENERIC_EVENTS)"
    samples = from_marks(db, tables)
    return samples, "marks with values" if samples else "none"


def numeric(vs):
    return [float(v) for v in vs if isinstance(v, (int, float))]


def check_counters(row, samples, via, iters):
    """The 16 counters are there, one sample per iteration for the tracked names, and their values
    tell the busy, idle and write intervals apart."""
    expected = [f"{n}: {f}" for n in TRACKED for f in FIGURES] + list(FIGURES)
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
        row("busy > 3x idle (process tree CPU, median %)", b > 3 * i,
            f"busy {b:.2f} %, idle {i:.2f} %")
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


def check_ranges(row, db, tables, iters):
    """The Stopwatch's intervals as NVTX ranges (set_nvtx_ranges): one range per interval, named
    as the interval, "spin" inside "busy"."""
    ranges = {}
    if "NVTX_EVENTS" in tables:
        text, join = nvtx_text(db, tables)
        for name, start, end in db.execute(
                f"SELECT {text}, e.start, e.end FROM NVTX_EVENTS e {join} WHERE e.end IS NOT NULL"):
            ranges.setdefault(name, []).append((start, end))
        print("NVTX ranges:", {k: len(v) for k, v in ranges.items()})
    for name in ("busy", "spin", "idle", "write"):
        n = len(ranges.get(name, []))
        row(f"range '{name}' from the Stopwatch (unified)", n == iters, f"{n} of {iters}")
    busy, spin = sorted(ranges.get("busy", [])), sorted(ranges.get("spin", []))
    nested = bool(busy) and len(busy) == len(spin) and all(
        b0 <= s0 and s1 <= b1 for (b0, b1), (s0, s1) in zip(busy, spin))
    median = statistics.median([e - s for s, e in busy]) / 1e6 if busy else None
    row("'spin' nested in 'busy'", nested, f"median busy {median:.1f} ms" if busy else "none")


def main(argv):
    path, iters, profiled, exported = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    rows = []  # (check, result, numbers)

    def row(check, ok, numbers):
        rows.append((check, "PASS" if ok else "FAIL", numbers))

    row("nsys profile, export", profiled == 0 and exported == 0,
        f"profile exit {profiled}, export exit {exported}")
    db, tables = None, []
    try:
        db = sqlite3.connect(path)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    except Exception as e:  # no report: nothing more to read
        print(f"cannot open {path}: {e}")
    samples, via = read_counters(db, tables)
    check_counters(row, samples, via, iters)
    check_ranges(row, db, tables, iters)

    print()
    print(f"{'check':48} {'result':6} numbers")
    for check, result, numbers in rows:
        print(f"{check:48} {result:6} {numbers}")
    return 0 if all(r[1] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
