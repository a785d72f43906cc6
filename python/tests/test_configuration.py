"""Configuration bounds seen from Python: a size that would exhaust memory is clamped where it
is set, so that measuring never raises (docs/configuration.md, "Bounds")."""


def test_a_huge_enable_recording_is_clamped_with_one_warning_and_measuring_never_raises(
        stopwatch, capfd):
    stopwatch.enable_recording(2_000_000_000)
    stopwatch.enable(0, None, False)
    for _ in range(3):
        stopwatch.start_meas("step")
        stopwatch.end_meas("step")
        stopwatch.finish_iter()
    results = stopwatch.results()
    assert results["samples"]["capacity"] == 1_000_000
    assert len(results["samples"]["threads"]) == 1
    err = capfd.readouterr().err
    assert err.count("laptime: warning: enable_recording(2000000000) is above 1000000") == 1
