// What each translation unit of odr-test exports: the same code, built two ways.
#pragma once
#include <string>

namespace instrumented {
void run_loop(int iterations);
std::string json();
const char* stopwatch_type();
}  // namespace instrumented

namespace compiled_out {
void run_loop(int iterations);
std::string json();
const char* stopwatch_type();
}  // namespace compiled_out
