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


def test_a_profile_without_nvtx_after_the_codes_enable_names_itself(nvtx, capfd, monkeypatch):
    """LAPTIME_PROFILE=evaluation keeps NVTX off as training does; read after the code's own
    NVTXRangeWrapper.enable() it cannot, and the one warning names the profile that was set."""
    import laptime

    nvtx.enable(False, False, False)
    monkeypatch.setenv("LAPTIME_PROFILE", "evaluation")
    laptime.configure_from_env()
    err = capfd.readouterr().err
    assert err.count("came after the code's NVTXRangeWrapper.enable()") == 1, err
    assert "LAPTIME_PROFILE=training or evaluation" in err, err  # not training alone
    assert nvtx.is_enabled
