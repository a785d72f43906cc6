"""The extension's caches keyed by object identity: measure(name) / range(name) return the calling
thread's cached scope for that name object, and a str name is read in place (its address is
laptime's per-thread cache key). A name object that dies and another allocated at its address,
names that are not str, and names with NUL bytes or non-ASCII text must still be told apart."""

import contextlib
import gc
import threading

import pytest

import laptime


def counts(stopwatch) -> dict:
    return {m["name"]: m["count"] for m in stopwatch.results()["measurements"]}


def fresh_str(text: str) -> str:
    """A new str object with this text (never the interned literal)."""
    return "".join(list(text))


def str_at(address: int, prefix: str, length: int, tries: int = 2000):
    """A new str of `length` chars, starting with `prefix`, allocated at `address`, if the
    allocator gives that address out again."""
    keep = []
    for i in range(tries):
        s = fresh_str(f"{prefix}{i:0{length - len(prefix)}d}")
        if id(s) == address:
            return s
        keep.append(s)  # held, so the next one is allocated elsewhere
    return None


@pytest.mark.parametrize("use", ["pair", "with"])
def test_a_freed_name_and_a_new_one_at_its_address_are_different_names(stopwatch, use):
    stopwatch.enable(0)
    reused = 0
    for i in range(50):
        first = fresh_str(f"first-{i:03d}")
        if use == "pair":
            stopwatch.start_meas(first)
            stopwatch.end_meas(first)
        else:
            with stopwatch.measure(first):
                pass
        address = id(first)
        del first
        gc.collect()
        second = str_at(address, f"s{i:03d}-", len(f"first-{i:03d}"))
        if second is None:  # measure() keeps its name alive, so this is the usual case for it
            second = fresh_str(f"secnd-{i:03d}")
        else:
            reused += 1
        text = str(second)
        if use == "pair":
            stopwatch.start_meas(second)
            stopwatch.end_meas(second)
        else:
            with stopwatch.measure(second):
                pass
        assert counts(stopwatch)[text] == 1, (i, text)
    c = counts(stopwatch)
    assert all(c[f"first-{i:03d}"] == 1 for i in range(50))
    assert sum(c.values()) == 100
    if use == "pair":
        assert reused > 0  # the allocator did hand the address out again: the case was tested


def test_measure_returns_one_object_per_name_and_thread(stopwatch, nvtx):
    name = fresh_str("cached")
    assert stopwatch.measure(name) is stopwatch.measure(name)
    assert nvtx.range(name) is nvtx.range(name)
    assert stopwatch.measure(name) is not nvtx.range(name)
    # An equal str that is another object gets its own scope, with the same name.
    other = fresh_str("cached")
    assert other is not name
    assert stopwatch.measure(other).name == "cached"
    seen = []
    t = threading.Thread(target=lambda: seen.append(stopwatch.measure(name)))
    t.start()
    t.join()
    assert seen[0] is not stopwatch.measure(name) and seen[0].name == "cached"


def test_a_few_hundred_fixed_names_keep_their_scopes_round_robin(stopwatch, nvtx):
    # Blocks of a model's fixed layer names allocate nothing once each was used: every name keeps
    # its scope, also where two names' hashes meet (a table of one entry per hash gave 4 to 34 of
    # 100 names a new scope at every block, by their addresses).
    stopwatch.enable(0)
    names = [fresh_str(f"layer {i}") for i in range(500)]
    for scope_of in (stopwatch.measure, nvtx.range):
        first = [scope_of(n) for n in names]
        for n in names:
            with scope_of(n):
                pass
        assert all(scope_of(n) is s for n, s in zip(names, first))


def test_an_equal_name_from_another_object_is_the_same_measurement(stopwatch):
    stopwatch.enable(0)
    for _ in range(3):
        with stopwatch.measure(fresh_str("same text")):
            pass
        stopwatch.start_meas(fresh_str("same text"))
        stopwatch.end_meas(fresh_str("same text"))
    assert counts(stopwatch) == {"same text": 6}


@pytest.mark.parametrize(
    "name, text",
    [
        ("a\0b", "a\0b"),
        ("é", "é"),
        ("日本語", "日本語"),
        ("😀 emoji", "😀 emoji"),
        (42, "42"),
        (("tuple", 1), "('tuple', 1)"),
        (4.5, "4.5"),
    ],
)
def test_names_with_nul_utf8_and_non_str_names(stopwatch, nvtx, name, text):
    stopwatch.enable(0)
    nvtx.enable(False, False, True)
    for _ in range(2):
        with stopwatch.measure(name), nvtx.range(name):
            pass
        stopwatch.start_meas(name)
        stopwatch.end_meas(name)
        nvtx.range_push(name)
        nvtx.range_pop(name)
    assert counts(stopwatch) == {text: 4}


def test_a_name_prefix_is_another_name(stopwatch):
    stopwatch.enable(0)
    for name in ("ab\0", "ab", "ab\0c", "ab"):
        with stopwatch.measure(name):
            pass
    assert counts(stopwatch) == {"ab\0": 1, "ab": 2, "ab\0c": 1}


def test_unhashable_name_is_a_type_error_when_entered(stopwatch):
    stopwatch.enable(0)
    scope = stopwatch.measure(["a", "list"])
    with pytest.raises(TypeError, match="hashable"):
        with scope:
            pass
    assert counts(stopwatch) == {}


def test_a_block_entered_before_enable_on_one_thread_ends_nothing_while_another_measures(
        stopwatch):
    # Each thread has its own scope for the name: the worker's block, entered before enable(),
    # must not end the main thread's measurement of the same name (nor raise on the worker).
    entered, release = threading.Event(), threading.Event()
    errors = []

    def worker():
        try:
            with stopwatch.measure("shared"):
                entered.set()
                release.wait()
        except Exception as e:  # pragma: no cover - the failure this test is about
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    entered.wait()
    stopwatch.enable(0)
    with stopwatch.measure("shared"):
        release.set()
        t.join()
        assert counts(stopwatch).get("shared", 0) == 0  # the main thread's is still running
    assert errors == []
    assert counts(stopwatch) == {"shared": 1}


def test_scope_methods_work_unbound_and_through_exit_stack(stopwatch):
    stopwatch.enable(0)
    scope = stopwatch.measure("stack")
    with contextlib.ExitStack() as stack:  # calls type(cm).__enter__(cm) and binds __exit__
        stack.enter_context(scope)
    assert type(scope).__enter__(scope) is None
    assert type(scope).__exit__(scope, None, None, None) is False
    assert scope.__enter__() is None and scope.__exit__(None, None, None) is False
    assert counts(stopwatch) == {"stack": 3}
    with pytest.raises(TypeError):
        type(scope).__enter__(object())
    with pytest.raises(TypeError):
        scope.__enter__(1)
    assert scope.__exit__ is scope.__exit__  # made once, not per lookup
    assert "__exit__" in repr(scope.__exit__)


@pytest.mark.parametrize("kind", ["measure", "range"])
def test_a_scopes_enter_and_exit_look_like_its_bound_methods(stopwatch, nvtx, kind):
    # scope.__enter__ is a callable of the extension's own (called without CPython's method
    # trampoline); to its users it is the bound method it replaces.
    scope = stopwatch.measure("m") if kind == "measure" else nvtx.range("r")
    for method, name in ((scope.__enter__, "__enter__"), (scope.__exit__, "__exit__")):
        assert method is getattr(scope, name)  # made once, not per lookup
        assert method.__self__ is scope
        assert method.__name__ == name and method.__qualname__ == f"_Scope.{name}"
        assert repr(method).startswith(f"<built-in method {name} of laptime._Scope object at ")
    with pytest.raises(TypeError, match=r"takes no arguments \(1 given\)"):
        scope.__enter__(1)
    with pytest.raises(TypeError, match="takes no keyword arguments"):
        scope.__enter__(x=1)
    assert scope.__enter__(**{}) is None and scope.__exit__(None, None, None) is False
    assert type(scope).__dict__["__enter__"].__get__(None, type(scope)) is type(scope).__enter__
    with pytest.raises(TypeError):
        type(scope).__dict__["__exit__"].__get__(object())


def test_scopes_dropped_from_the_cache_are_collected(stopwatch, nvtx):
    # A scope and its __enter__ / __exit__ form a cycle that the garbage collector frees once
    # nothing else holds them.
    from laptime import _laptime

    def alive():
        return sum(1 for o in gc.get_objects() if type(o).__name__ in ("_Scope", "_ScopeEnter"))

    gc.collect()
    before = alive()
    scopes = [stopwatch.measure(f"held {i}") for i in range(10)] + [nvtx.range("held")]
    _laptime._testing_reset()  # empties the scope cache
    assert alive() >= before + len(scopes)
    del scopes
    gc.collect()
    assert alive() == before


def test_many_names_evict_scopes_without_losing_blocks(stopwatch):
    # More (name, thread) pairs than the scope cache holds (4096): evicted scopes are freed or,
    # while a block is open, kept alive by it, and every block still ends its own measurement.
    stopwatch.enable(0)
    names = [f"n{i}" for i in range(3000)]

    def every_name():
        with stopwatch.measure("outer"):
            for name in names:
                with stopwatch.measure(name):
                    pass

    every_name()
    t = threading.Thread(target=every_name)
    t.start()
    t.join()
    gc.collect()
    c = counts(stopwatch)
    assert c["outer"] == 2 and all(c[n] == 2 for n in names)


class Label:
    """A name that is not a str: hashed by identity, named by its str()."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


@pytest.mark.parametrize("make", [Label, lambda text: fresh_str("é" + text)],
                         ids=["object", "non-ASCII str"])
def test_names_freed_and_reallocated_at_the_same_addresses_keep_their_own_text(stopwatch, make):
    # More objects than the identity cache (256 entries) and the str() cache (4096) hold, each
    # used once and dropped: addresses come back for new objects with other texts.
    stopwatch.enable(0)
    prefix = "" if make is Label else "é"
    addresses = set()
    repeated = 0
    expected = {}
    for i in range(10000):
        name = make(f"L{i % 50}")
        repeated += id(name) in addresses
        addresses.add(id(name))
        stopwatch.start_meas(name)
        stopwatch.end_meas(name)
        uses = 1
        if i % 3 == 0:
            with stopwatch.measure(name):
                pass
            uses += 1
        expected[f"{prefix}L{i % 50}"] = expected.get(f"{prefix}L{i % 50}", 0) + uses
        del name
    assert counts(stopwatch) == expected
    assert repeated > 0  # addresses were reused: the case was tested


def test_evicted_scopes_are_freed_without_the_cycle_collector(stopwatch):
    # A scope and its bound __enter__/__exit__ refer to each other; one the cache evicts and
    # nobody else holds is unlinked and freed at once (a program cycling through many names
    # must not leave them all to the garbage collector). Not enabled: the names are not interned
    # (the process-wide name table is bounded), the scopes are made all the same.
    gc.collect()
    gc.disable()
    try:
        for i in range(10000):
            with stopwatch.measure(f"evicted {i}"):
                pass
        alive = sum(1 for o in gc.get_objects() if type(o).__name__ == "_Scope")
    finally:
        gc.enable()
    assert alive <= 4096  # the scope cache's size
