// A file that measures with its own layout through the light headers (one test defines
// LAPTIME_MAX_NAMES=8192, others _GLIBCXX_DEBUG or _GLIBCXX_USE_CXX11_ABI=0), linked against an
// implementation part built with the defaults: the link must fail, naming the layout's namespace
// (laptime::v1_max_names_8192, laptime::v1_glibcxx_debug, laptime::v1_old_string), where the two
// layouts once met at run time. results() too: a struct of strings, its symbol has no ABI tag.
#include <laptime/results.hpp>
#include <laptime/stopwatch.hpp>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();
  sw.print_eval_times();
  return static_cast<int>(sw.results().iterations_measured) - 1;
}
