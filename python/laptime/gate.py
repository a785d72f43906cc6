"""The regression gate of ``laptime compare --fail-above``: is the test side slower than the
reference, with confidence, by more than a threshold? Plain arithmetic on figures already read
(``compare`` reads the files), so it is tested with known data; the method is in docs/reports.md,
"Gating CI on a slowdown".

Each gated quantity (a name's time per iteration, or an iteration's wall time) has, per run, its
mean and, where the run recorded intervals, its value in each measured iteration. The difference
is ``test mean / reference mean - 1`` over the runs of each side; its interval is a percentile
bootstrap: resample the runs of each side with replacement and, on a side of one or two runs, within
a run that has per-iteration values, its iterations too (``_IterationResampler``); recompute the
difference; take the quantiles. The gate fails a
quantity when the whole interval lies above the threshold. The intervals of the quantities gated
together are joint: each is at the level that makes them all hold at the confidence asked for.
"""

import math
import random
import statistics
from collections import namedtuple

from laptime import samples as _samples

RESAMPLES = 2000
SEED = 1
# From this many runs a side, the runs' own spread is the interval's, and their recorded
# iterations are not resampled too: the runs' means already carry the spread within a run, and a
# level of iid iterations would count it again (one slow iteration per run, a framework's first
# validation, widened every interval until a 2x slowdown passed).
RUNS_ALONE = 3
ITERATION = "[iteration]"  # the label of an iteration's wall time, end to end

# One run's figure for a quantity: its mean, and its per-iteration values or None.
RunFigure = namedtuple("RunFigure", "mean per_iteration")

# The verdict on one quantity; differences are fractions (0.05 is 5 % slower).
Verdict = namedtuple("Verdict", "name difference low high failed")


class GateError(ValueError):
    """Figures the gate cannot judge with any confidence (one run a side, nothing recorded)."""


def parse_fraction(text, option, upper=None):
    """``"5%"`` or ``"0.05"`` as 0.05; a plain number is a fraction, so ``"5"`` (5 % or 500 %?) is
    refused. ``upper`` excludes that value and above; below 0 is refused. ValueError says why."""
    body = text.strip()
    percent = body.endswith("%")
    try:
        value = float(body[:-1] if percent else body)
    except ValueError:
        value = math.nan
    hint = "a percentage (5%) or a fraction (0.05)"
    if not math.isfinite(value):
        raise ValueError(f"{option} {text!r}: not {hint}")
    if percent:
        value /= 100
    elif value >= 1:
        raise ValueError(f"{option} {text!r}: a plain number is a fraction; write "
                         f"{_plain(value)}% for {_plain(value)} percent")
    if value < 0 or (upper is not None and value >= upper):
        limit = "" if upper is None else f" and below {_plain(upper * 100)}%"
        raise ValueError(f"{option} {text!r}: must be 0 or more{limit}")
    return value


def _plain(x):
    return f"{x:g}"


def run_figures(results):
    """{quantity: RunFigure} of one run's results: each measured name's time per iteration
    (seconds), and with recorded intervals each name's per-iteration values and ``ITERATION``,
    the wall time of each measured iteration."""
    out = {m["name"]: RunFigure(m["mean_per_iter_s"], None)
           for m in results.get("measurements", []) if m.get("mean_per_iter_s") is not None}
    s = results.get("samples")
    if not s:
        return out
    iterations = _samples.whole_iterations(results)
    if len(iterations) < 2:
        return out
    per_name = _samples.per_iteration(s)
    # Worker processes record no intervals: a name with worker figures keeps its mean alone (its
    # recorded values would be the main process's part, or zeros).
    in_workers = {m["name"] for m in results.get("measurements", []) if m.get("workers")}
    for name in out:
        if name in in_workers:
            continue
        values = [per_name.get(name, {}).get(k, 0.0) for k in iterations]
        # None recorded (ended on a thread without a ring: the samples' "unrecorded"): the mean
        # alone, as for a name measured in workers.
        if any(values):
            # The run's mean is the whole run's: the recorded iterations (the ring's last ones)
            # tell only the spread about it.
            out[name] = RunFigure(out[name].mean, values)
    ends = dict(s.get("iterations") or [])
    walls = [(ends[k] - ends[k - 1]) / 1e9 for k in iterations if k - 1 in ends]
    if len(walls) >= 2:
        out[ITERATION] = RunFigure(sum(walls) / len(walls), walls)
    return out


def quantities(ref_runs, test_runs, name=None):
    """(gated names in order, names not gated): every quantity present in every run of both sides,
    or only ``name``; ``ITERATION`` last."""
    seen = []
    for run in ref_runs + test_runs:
        seen += [q for q in run if q not in seen]
    everywhere = [q for q in seen if all(q in run for run in ref_runs + test_runs)]
    if name is not None:
        return [q for q in everywhere if q == name], []
    gated = [q for q in everywhere if q != ITERATION] + [q for q in everywhere if q == ITERATION]
    return gated, [q for q in seen if q not in everywhere and q != ITERATION]


def without_spread(ref_runs, test_runs, quantity):
    """Whether a side of one run lacks ``quantity``'s per-iteration values (a name measured in
    worker processes): nothing tells its spread, so it is not gated."""
    return any(len(side) < 2 and not all(run[quantity].per_iteration for run in side)
               for side in (ref_runs, test_runs))


def check_judgeable(side_runs, what):
    """A side of one run without per-iteration values has no spread to judge from."""
    if len(side_runs) < 2 and not any(f.per_iteration for run in side_runs for f in run.values()):
        raise GateError(f"--fail-above needs at least 2 runs per side, or recorded intervals "
                        f"(LAPTIME_RECORD=N), to know its confidence; {what} has one run and "
                        f"none recorded")


def joint_level(confidence, count):
    """The level of each of ``count`` intervals that hold together at ``confidence`` (Bonferroni):
    gating several names at once must not multiply the false alarms."""
    return 1 - (1 - confidence) / max(count, 1)


def judge(ref, test, name, threshold, confidence, seed=SEED, resamples=RESAMPLES):
    """The Verdict on one quantity, ``ref`` and ``test`` its RunFigure per run; ``confidence`` is
    this interval's own level."""
    base = _side_mean(ref)
    if base <= 0:
        return None
    rng = random.Random(seed)
    refs = _resampled_means(ref, rng, resamples, len(ref) < RUNS_ALONE)
    tests = _resampled_means(test, rng, resamples, len(test) < RUNS_ALONE)
    diffs = sorted(_ratio(t, r) - 1 for t, r in zip(tests, refs))
    tail = (1 - confidence) / 2
    low = diffs[int(math.floor(tail * resamples))]
    high = diffs[int(math.ceil((1 - tail) * resamples)) - 1]
    return Verdict(name, _side_mean(test) / base - 1, low, high, low > threshold)


def _ratio(test, ref):
    # A resampled reference of nothing but empty iterations: any test time is infinitely slower.
    return test / ref if ref > 0 else math.inf


def _side_mean(runs):
    return sum(f.mean for f in runs) / len(runs)


def _resampled_means(runs, rng, resamples, iterations=True):
    """The side's mean in each of ``resamples`` bootstrap resamples: its runs drawn with
    replacement, and where ``iterations``, a run with per-iteration values its mean moved as
    resampling its iterations moves theirs."""
    n = len(runs)
    picks = rng.choices(runs, k=n * resamples)  # every draw at once: most of the gate's time
    if iterations and any(f.per_iteration for f in runs):
        moves = {id(f): _IterationResampler(f.per_iteration) for f in runs}
        values = [f.mean + moves[id(f)].draw(rng) for f in picks]
    else:
        values = [f.mean for f in picks]
    center = _side_mean(runs)
    # Resampled means of n runs spread sqrt((n-1)/n) as wide as means of n new runs would (the
    # plug-in variance's bias): widen them back, or a handful of runs gives too narrow an interval.
    # As a ratio to the center, so that a time stays a time: widening the difference let a fast
    # resample of runs with one slow outlier go below zero (an interval from -291 %).
    widen = math.sqrt(n / (n - 1)) if n > 1 else 1.0
    return [_widened(sum(values[i:i + n]) / n, center, widen)
            for i in range(0, n * resamples, n)]


def _widened(mean, center, widen):
    # center * (mean / center) ** widen: to first order center + widen * (mean - center).
    if mean <= 0 or center <= 0:
        return mean
    return center * (mean / center) ** widen


class _IterationResampler:
    """How far the mean of a run's per-iteration values moves when its iterations are resampled
    with replacement, drawn at a fraction of the cost of drawing every iteration. Exact for a few
    values. For more, the ``TAIL`` largest are drawn one by one (each one's count in a resample of
    many is Poisson(1)), so that one slow iteration among hundreds (a framework's first
    validation, a checkpoint) moves the mean as it really does, never below the others; the rest,
    whose spread is light, are drawn as the normal distribution their resampled sum tends to.
    (A normal draw for all of them let one outlier's spread carry a run's mean to zero and an
    interval to +10000 %.)"""

    TAIL = 32

    def __init__(self, values):
        self.values = list(values or [])
        self.n = len(self.values)
        self.mean = sum(self.values) / self.n if self.n else 0.0
        ordered = sorted(self.values)
        self.tail = ordered[-self.TAIL:] if self.n > self.TAIL else []
        bulk = ordered[:-self.TAIL] if self.tail else []
        self.bulk_mean = sum(bulk) / len(bulk) if bulk else 0.0
        self.bulk_sd = statistics.pstdev(bulk) if len(bulk) > 1 else 0.0

    def draw(self, rng):
        if self.n < 2:
            return 0.0
        if not self.tail:
            return sum(rng.choices(self.values, k=self.n)) / self.n - self.mean
        total, drawn = 0.0, 0
        for x in self.tail:
            c = _poisson_1(rng)
            total += c * x
            drawn += c
        rest = max(self.n - drawn, 0)
        total += rest * self.bulk_mean + math.sqrt(rest) * self.bulk_sd * rng.gauss(0.0, 1.0)
        return total / self.n - self.mean


_EXP_MINUS_1 = math.exp(-1.0)


def _poisson_1(rng):
    """A Poisson(1) draw (Knuth's product of uniforms: two or three on average)."""
    k, p = 0, rng.random()
    while p > _EXP_MINUS_1:
        k += 1
        p *= rng.random()
    return k
