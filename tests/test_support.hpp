// Shared helpers for laptime's doctest suites.
#pragma once

#include <doctest/doctest.h>

#include "laptime/config.hpp"

// Behavioural test cases need the instrumentation compiled in; in the LAPTIME_DISABLE build of
// the suite they compile (proving the API is unchanged) and are reported as skipped.
#define LAPTIME_NEEDS_ENABLED doctest::skip(!LAPTIME_ENABLED)
