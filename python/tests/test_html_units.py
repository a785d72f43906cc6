"""laptime html's durations read as the text report's: three digits in the largest unit whose
rounded value is at least 1 (docs/reports.md), never an exponent."""

from laptime.html import duration


def test_durations_round_into_the_next_unit_with_three_digits():
    assert duration(0.0009996) == "1.00 ms"  # was "1e+03 µs"
    assert duration(0.99996) == "1.00 s"
    assert duration(0.00123) == "1.23 ms"
    assert duration(0.001) == "1.00 ms"
    assert duration(2.5e-7) == "250 ns"
    assert duration(4.2e-5) == "42.0 µs"
    assert duration(3600.0) == "3600 s"
    assert duration(0.0) == "0.00 ns"
    assert duration(None) == "n/a"
