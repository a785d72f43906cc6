// A file that measures with its own LAPTIME_MAX_NAMES (the test defines 8192) through the light
// header, linked against an implementation part built with the default: the link must fail,
// naming laptime::v1_max_names_8192, where the two layouts once met at run time.
#include <laptime/stopwatch.hpp>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();
  sw.print_eval_times();
}
