// Every standard header before laptime's, the way a large program's precompiled header or a
// unity build puts them: laptime must compile cleanly after any of them (an unqualified call
// such as quoted(s) would otherwise find std::quoted by argument-dependent lookup once
// <iomanip> is in). Built as C++17 and C++20 with GCC and Clang, -O3 -Wall -Wextra -Werror.
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <bitset>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <cfenv>
#include <cfloat>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <clocale>
#include <cmath>
#include <codecvt>
#include <complex>
#include <condition_variable>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuchar>
#include <cwchar>
#include <cwctype>
#include <deque>
#include <exception>
#include <execution>
#include <filesystem>
#include <forward_list>
#include <fstream>
#include <functional>
#include <future>
#include <initializer_list>
#include <iomanip>
#include <ios>
#include <iosfwd>
#include <iostream>
#include <istream>
#include <iterator>
#include <limits>
#include <list>
#include <locale>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <ostream>
#include <queue>
#include <random>
#include <ratio>
#include <regex>
#include <scoped_allocator>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <stack>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <valarray>
#include <variant>
#include <vector>
#if __cplusplus >= 202002L
#include <barrier>
#include <bit>
#include <compare>
#include <concepts>
#include <latch>
#include <numbers>
#include <ranges>
#include <semaphore>
#include <source_location>
#include <span>
#include <stop_token>
#include <syncstream>
#include <version>
#if __has_include(<coroutine>) && defined(__cpp_impl_coroutine)
#include <coroutine>
#endif
#if __has_include(<format>)
#include <format>
#endif
#endif

#include <laptime/laptime.hpp>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.track_cpu_usage("loop");
  for (int i = 0; i < 3; ++i) {
    LAPTIME_MEAS("consumer step");
    LAPTIME_RANGE("consumer range");
    sw.start_meas("loop");
    sw.end_meas("loop");
    sw.finish_iter();
  }
  sw.print_eval_times();
  std::cout << sw.to_json() << std::quoted("done") << "\n";
  return 0;
}
