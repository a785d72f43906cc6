// A file that measures with its own layout through the light header (one test defines
// LAPTIME_MAX_NAMES=8192, another _GLIBCXX_DEBUG), linked against an implementation part built
// with the defaults: the link must fail, naming the layout's namespace
// (laptime::v1_max_names_8192, laptime::v1_glibcxx_debug), where the two layouts once met at run
// time.
#include <laptime/stopwatch.hpp>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();
  sw.print_eval_times();
}
