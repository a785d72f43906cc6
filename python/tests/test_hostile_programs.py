"""Programs that use laptime in ways its tests did not, found by a review that attacked the API:
each runs in a process of its own (a failure was a crash or a hang), and each failed before its
fix (docs/python.md: Names, Printing)."""

import os
import subprocess
import sys
import textwrap

import pytest

import laptime


def run(code, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for name in ("LAPTIME_PROFILE", "LAPTIME_PROGRESS", "LAPTIME_PRINT_EVERY", "LAPTIME_STOPWATCH"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                          capture_output=True, timeout=timeout)


# The identity cache of names (names.cpp) must keep the bytes of a str with lone surrogates alive
# itself: they belong to the name cache, which starts over when full. Before, the entry kept the
# str, and its view dangled once 4096 other names had gone through the cache.
NAME_CACHE = """
    import laptime
    M = (1 << 64) - 1
    def slot(o):  # names.cpp's identity_entry
        return (((id(o) >> 4) * 0x9e3779b97f4a7c15) & M) >> 56
    sw = laptime.Stopwatch()
    sw.enable(0)
    s = "\\ud800" + "N" * 40  # no UTF-8 form: its bytes come from the name cache
    sw.start_meas(s); sw.end_meas(s)
    target, keep = slot(s), []
    while True:  # another name takes s's identity entry
        o = "".join(["\\xe9", "v"])
        keep.append(o)
        if slot(o) == target:
            break
    sw.start_meas(o); sw.end_meas(o)
    sw.start_meas(s); sw.end_meas(s)  # s again, through the name cache
    class K:
        def __str__(self): return "k"
    ks = []
    while len(ks) < 4100:  # the name cache fills and starts over
        k = K()
        (ks if slot(k) != target else keep).append(k)
    for k in ks:
        sw.start_meas(k); sw.end_meas(k)
    junk = [bytes([65 + i % 26]) * 46 for i in range(20000)]
    sw.start_meas(s); sw.end_meas(s)
    print(sorted(m["name"] for m in sw.results()["measurements"]))
"""


def test_a_name_whose_bytes_the_name_cache_keeps_outlives_the_cache_starting_over():
    proc = run(NAME_CACHE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == repr(sorted(["\\ud800" + "N" * 40, "\xe9v", "k"]))


def test_print_eval_times_waits_for_a_report_on_another_thread_without_the_gil():
    proc = run("""
        import io, sys, threading, time
        import laptime
        class SlowOut(io.TextIOBase):
            def write(self, s):
                time.sleep(0.02)  # releases the GIL, as real output does
                return len(s)
        sw = laptime.Stopwatch()
        sw.enable(0, 1)
        sys.stdout = SlowOut()
        def loop():
            for _ in range(20):
                sw.start_meas("step"); sw.end_meas("step")
                sw.finish_iter()  # prints under the report lock
        t = threading.Thread(target=loop)
        t.start()
        for _ in range(20):
            sw.print_eval_times()
        t.join()
        sys.__stdout__.write("done\\n")
    """, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"


def test_ctrl_c_during_a_periodic_report_reaches_the_program():
    proc = run("""
        import io, os, signal, sys, threading, time
        import laptime
        # Python's own Ctrl-C handler, also where SIGINT came ignored (a shell's background job).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        class SlowStdout(io.TextIOBase):
            def write(self, s):
                time.sleep(0.5)
                return len(s)
        sw = laptime.Stopwatch()
        sw.enable(0, 1)
        sys.stdout = SlowStdout()
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            for i in range(5):
                sw.start_meas("step"); sw.end_meas("step")
                sw.finish_iter()
            sys.__stdout__.write("ran on\\n")
        except KeyboardInterrupt:
            sys.__stdout__.write("interrupted\\n")
    """)
    assert proc.stdout == "interrupted\n", proc.stderr


@pytest.mark.parametrize("make", [
    lambda sw: type(sw.measure("x")),
    lambda sw: type(sw.measure("x").__enter__),
])
def test_the_scope_types_are_made_by_laptime_only(stopwatch, make):
    scope_type = make(stopwatch)
    with pytest.raises(TypeError, match="cannot create"):
        scope_type()
    assert laptime.Stopwatch().measure("x").name == "x"


# `@stopwatch.measure` without its name: the function became the scope's name and each call of it
# wrapped its argument instead of running the body, silently. Now the first call says why.
def test_a_decorator_without_its_name_says_so_and_never_swallows_the_call(stopwatch):
    calls = []

    @stopwatch.measure
    def train_step(batch):
        calls.append(batch)
        return batch * 2

    with pytest.raises(TypeError, match=r"@measure needs a name: write @measure\(\"name\"\)"):
        train_step(21)
    nvtx = laptime.NVTXRangeWrapper()

    @nvtx.range
    def g(x):
        return x

    with pytest.raises(TypeError, match="@range needs a name"):
        g(1)
    with pytest.raises(TypeError, match="as a decorator takes a function, not 21"):
        stopwatch.measure("step")(21)

    @stopwatch.measure("step")
    def step(x):
        calls.append(x)
        return x + 1

    assert step(1) == 2 and calls == [1]


# results() late in interpreter shutdown (a __del__ of a module-level object): it imported json
# at each call, which fails there ("sys.meta_path is None"). to_json() worked all along.
def test_results_from_a_del_late_in_interpreter_shutdown():
    r = run("""
        import sys
        import laptime
        sw = laptime.Stopwatch(0)
        with sw.measure("x"):
            pass
        class Late:
            def __del__(self):
                names = [m["name"] for m in sw.results()["measurements"]]
                sys.stderr.write("late results: %s\\n" % names)
        sys.modules["__late__"] = Late()
    """)
    assert r.returncode == 0, r.stderr
    assert "late results: ['x']" in r.stderr, r.stderr
    assert "Error" not in r.stderr, r.stderr


# A subclass made at run time (a fixture, a per-config wrapper) is freed with its instance: they
# were kept in a module-level dict forever.
def test_a_subclass_made_at_run_time_is_freed_with_its_instance():
    import gc
    import weakref

    def make():
        class PerRun(laptime.Stopwatch):
            pass

        assert PerRun() is PerRun()  # one instance per subclass, as before
        assert type(PerRun()) is PerRun
        return weakref.ref(PerRun)

    refs = [make() for _ in range(50)]
    gc.collect()
    assert all(r() is None for r in refs)


# Under the warn policy a block refused because its name runs (a generator suspended inside it)
# shared the cached scope object with a later, valid block of the name, whose exit was then taken
# for the refused one: the valid block ended nothing, and its interval ran on until the generator
# closed. A refused block's scope is no longer handed out again.
def test_a_refused_block_never_takes_the_exit_of_a_later_valid_block(stopwatch):
    import time
    stopwatch.enable(0)
    laptime.set_error_policy("warn")
    try:
        stopwatch.start_meas("x")

        def gen():
            with stopwatch.measure("x"):  # refused: "x" runs on this thread (warned)
                yield

        g = gen()
        next(g)  # suspended inside the refused block
        stopwatch.end_meas("x")
        with stopwatch.measure("x"):  # a valid block
            time.sleep(0.01)
        x = next(m for m in stopwatch.results()["measurements"] if m["name"] == "x")
        assert x["count"] == 2 and not x["running"]
        g.close()  # the refused block's exit ends nothing
        x = next(m for m in stopwatch.results()["measurements"] if m["name"] == "x")
        assert x["count"] == 2 and not x["running"]
        assert x["max_s"] < 1.0
    finally:
        laptime.set_error_policy("throw")


# Refused blocks that exit out of order (generators closed in the order they were suspended in)
# or on another thread left their scope behind in the thread's list of refused blocks, by address:
# once the garbage collector freed it, a new scope at the same address had its valid exit taken
# for the refused one, and its interval ran on.
def test_refused_blocks_closed_out_of_order_or_elsewhere_never_take_a_later_exit(stopwatch):
    import gc
    import threading
    stopwatch.enable(0)
    laptime.set_error_policy("warn")
    try:
        def gen():
            with stopwatch.measure("x"):  # the first one runs "x", the others are refused
                yield

        for close_elsewhere in (False, True):
            gens = [gen() for _ in range(3)]
            for g in gens:
                next(g)
            for g in gens[:2]:
                g.close()  # in the order they were suspended in: the refused one first
            if close_elsewhere:
                t = threading.Thread(target=gens[2].close)
                t.start()
                t.join()
            else:
                gens[2].close()
            del gens, g
            gc.collect()
            for i in range(2000):  # new scopes (a new str each: the scope cache misses), some
                with stopwatch.measure("".join(["y", str(i % 20)])):  # at the freed addresses
                    pass
            running = [m["name"] for m in stopwatch.results()["measurements"] if m["running"]]
            assert running == []
    finally:
        laptime.set_error_policy("throw")


# A legacy subinterpreter on each Python: one that shares the main interpreter's GIL, the kind that
# may import a single-phase extension module such as laptime's. run_in raises where the code raised.
LEGACY_SUBINTERPRETERS = """
    try:  # Python 3.13
        import _interpreters as interpreters

        def new_interpreter():
            return interpreters.create("legacy")

        def run_in(interp, code):
            failure = interpreters.exec(interp, code)
            if failure is not None:
                raise RuntimeError(getattr(failure, "formatted", failure))
    except ImportError:
        import _xxsubinterpreters as interpreters

        def new_interpreter():
            try:  # Python 3.12
                return interpreters.create(isolated=False)
            except TypeError:  # 3.8-3.11: no other kind
                return interpreters.create()

        run_in = interpreters.run_string
"""


def skip_without_subinterpreters():
    import importlib.util
    if not any(importlib.util.find_spec(m) for m in ("_interpreters", "_xxsubinterpreters")):
        pytest.skip("this Python has no subinterpreters (_interpreters, _xxsubinterpreters)")


def run_with_subinterpreters(code):
    skip_without_subinterpreters()
    return run(textwrap.dedent(LEGACY_SUBINTERPRETERS) + textwrap.dedent(code))


# A subinterpreter that imports laptime and ends ran the package's exit handler, which took the
# main interpreter's sys.stdout printer away: the next periodic report bypassed sys.stdout.
def test_a_subinterpreter_ending_leaves_the_main_interpreters_printer_alone():
    proc = run_with_subinterpreters("""
        import contextlib, io
        import laptime
        interp = new_interpreter()
        run_in(interp, "import laptime")
        interpreters.destroy(interp)
        sw = laptime.Stopwatch()
        sw.enable(0, 1)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            sw.start_meas("step"); sw.end_meas("step"); sw.finish_iter()
        print("report through sys.stdout:", "laptime stopwatch" in buf.getvalue())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("report through sys.stdout: True"), proc.stdout


# A decorator and a pickled scope in a legacy subinterpreter called the package of the interpreter
# that had imported laptime first: its Python code ran in the subinterpreter, after whose end the
# main interpreter's next decorator crashed (3.12, 3.13), and pickle refused the other package's
# _scope_from.
def test_a_legacy_subinterpreter_decorates_and_pickles_with_its_own_laptime():
    proc = run_with_subinterpreters("""
        import pickle
        import laptime
        SUB = '''
        import pickle, sys
        import laptime
        sw = laptime.Stopwatch()
        @sw.measure("sub step")
        def step():
            return 1
        assert step() == 1
        assert step.__globals__ is sys.modules["laptime"].__dict__, "another interpreter's laptime"
        print(pickle.loads(pickle.dumps(sw.measure("sub p"))), flush=True)
        '''
        sw = laptime.Stopwatch()
        sw.enable(0)
        interp = new_interpreter()
        run_in(interp, SUB)
        interpreters.destroy(interp)
        @sw.measure("main step")
        def step():
            return 2
        assert step() == 2 and step.__globals__ is laptime.__dict__
        print(pickle.loads(pickle.dumps(sw.measure("main p"))))
        print(sorted(m["name"] for m in sw.results()["measurements"]))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "<laptime measure 'sub p'>", "<laptime measure 'main p'>", "['main step', 'sub step']"]


# The cache of names that are not str (names.cpp) was one for all interpreters: a lookup compared
# the name with the names other interpreters had used, by their ==, which is their Python code.
# Once a subinterpreter that had used a pathlib path as a name ended, the main interpreter's
# equal path raised NameError ("name 'isinstance' is not defined").
def test_a_name_an_ended_subinterpreter_used_is_never_compared_in_another():
    proc = run_with_subinterpreters("""
        import pathlib
        import laptime
        SUB = '''
        import pathlib
        import laptime
        sw = laptime.Stopwatch()
        sw.start_meas(pathlib.PurePosixPath("data")); sw.end_meas(pathlib.PurePosixPath("data"))
        '''
        sw = laptime.Stopwatch()
        sw.enable(0)
        interp = new_interpreter()
        run_in(interp, SUB)
        interpreters.destroy(interp)
        sw.start_meas(pathlib.PurePosixPath("data")); sw.end_meas(pathlib.PurePosixPath("data"))
        print([(m["name"], m["count"]) for m in sw.results()["measurements"]])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[('data', 2)]"


# The legacy subinterpreter that imported laptime first ended before the others. On 3.8-3.12 the
# next import ran the extension's initialisation again: an interpreter that had imported laptime
# before no longer caught laptime.UsageError, and got the new interpreter's decorator. On 3.13 the
# others' decorators and pickled scopes looked for the package in the ended one (AttributeError).
def test_the_interpreter_that_imported_laptime_first_may_end_before_the_others():
    proc = run_with_subinterpreters("""
        import sys
        CHECK = '''
        import pickle, sys
        import laptime
        sw = laptime.Stopwatch()
        try:
            sw.end_meas("never started")
        except laptime.UsageError:
            pass
        @sw.measure("step")
        def step():
            pass
        step()
        assert step.__globals__ is sys.modules["laptime"].__dict__, "another interpreter's laptime"
        pickle.loads(pickle.dumps(sw.measure("p")))
        '''
        first, second = new_interpreter(), new_interpreter()
        run_in(first, "import laptime; laptime.Stopwatch().enable(0)")
        run_in(second, "import laptime")
        interpreters.destroy(first)
        exec(CHECK)
        run_in(second, CHECK)
        interpreters.destroy(second)
        exec(CHECK)
        class Late:  # the main interpreter's results() from a __del__ late in its shutdown
            def __del__(self):
                names = [m["name"] for m in sw.results()["measurements"]]
                sys.stderr.write("late results: %s\\n" % names)
        sys.modules["__late__"] = Late()
        print("checked")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "checked\n"
    assert "late results: ['step']" in proc.stderr and "Error" not in proc.stderr, proc.stderr


# An isolated subinterpreter (a GIL of its own) refuses any single-phase extension module; the
# package then said that laptime's extension was not built for this Python.
def test_an_isolated_subinterpreter_is_told_why_laptime_does_not_load():
    if sys.version_info < (3, 12):
        pytest.skip("isolated subinterpreters (a GIL of their own) exist from Python 3.12")
    proc = run("""
        try:
            import _interpreters as interpreters  # 3.13
        except ImportError:
            import _xxsubinterpreters as interpreters  # 3.12
        interp = interpreters.create()  # isolated by default
        try:
            failure = interpreters.exec(interp, "import laptime")
        except AttributeError:  # 3.12
            try:
                failure = interpreters.run_string(interp, "import laptime")
            except Exception as error:
                failure = error
        print(getattr(failure, "formatted", failure))
    """)
    assert proc.returncode == 0, proc.stderr
    assert "loads only in the main interpreter or in a legacy subinterpreter" in proc.stdout
    assert "not built for this Python" not in proc.stdout, proc.stdout
