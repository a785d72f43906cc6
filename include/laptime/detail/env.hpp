// laptime internals: reading the environment: the text parsers (bool, int), the one form of a
// malformed variable's warning, the launchers' rank variables. The parsers take the variable's
// text, so they are tested without touching the environment. The LAPTIME_* variables are read
// through their table (detail/env_vars.hpp, docs/configuration.md); the warning form of
// detect_rank() is in error.hpp.
#pragma once

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/names.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// "1", "true", "yes", "on" / "0", "false", "no", "off" (any case); nullopt for anything else.
inline std::optional<bool> parse_bool(std::string_view text) {
  std::string v;
  for (const char c : text) v += static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return false;
  return std::nullopt;
}

/// `text` without the spaces around it.
inline std::string_view trim_spaces(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

/// A whole decimal int (surrounding spaces allowed; no sign but '-', no base prefix, no
/// exponent); nullopt for anything else or out of range. Never undefined, never a partial match.
inline std::optional<int> parse_int(std::string_view text) {
  text = trim_spaces(text);
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty()) return std::nullopt;
  // Accumulated as a negative number, whose range holds INT_MIN. (A loop rather than
  // std::from_chars: <charconv> costs every file that reads the environment a parse.)
  long long v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 - (c - '0');
    if (v < static_cast<long long>(INT_MIN)) return std::nullopt;
  }
  if (!negative) {
    if (-v > static_cast<long long>(INT_MAX)) return std::nullopt;
    v = -v;
  }
  return static_cast<int>(v);
}

/// A plain decimal number, digits with at most one '.' (spaces around it allowed; no sign,
/// exponent, "inf" or "nan"); nullopt for anything else. Read here rather than by strtod, which
/// follows the program's LC_NUMERIC: under de_DE it stops at the '.' of "2.5". The first 19
/// significant digits count (a fraction's further digits are dropped), rounded once or twice.
inline std::optional<double> parse_plain_decimal(std::string_view text) {
  text = trim_spaces(text);
  std::uint64_t mantissa = 0;
  int significant = 0, exponent = 0;
  bool digit = false, point = false;
  for (const char c : text) {
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    digit = true;
    if (significant < 19 && (mantissa != 0 || c != '0')) {
      mantissa = mantissa * 10 + static_cast<std::uint64_t>(c - '0');
      ++significant;
      if (point) --exponent;
    } else if (significant == 0) {
      if (point) --exponent;  // a leading zero of the fraction
    } else if (!point) {
      ++exponent;  // an integer digit past the 19th
    }
  }
  if (!digit) return std::nullopt;
  double scale = 1;
  for (int i = 0; i < (exponent < 0 ? -exponent : exponent); ++i) scale *= 10;
  const auto m = static_cast<double>(mantissa);
  return exponent < 0 ? m / scale : m * scale;
}

/// The one warning of a malformed variable: "NAME='value' <why>; ignored", the value escaped (a
/// variable must not rewrite the terminal) and cut to a readable length.
inline std::string malformed_env(std::string_view name, std::string_view value,
                                 std::string_view why) {
  std::string w(name);
  w += "='";
  append_escaped(w, value.substr(0, 64), /*json=*/false);
  w += value.size() > 64 ? "'... " : "' ";
  w += why;
  w += "; ignored";
  return w;
}

/// What a boolean variable accepts, written once for every boolean variable's warning.
inline constexpr std::string_view kNotABoolean =
    "is not a boolean (1/0, true/false, on/off, yes/no, in any case)";

/// getenv(name), for the parsers that take a getenv-like function object (settings_from_env,
/// detect_rank): `settings_from_env([](const char* n) { return detail::env_raw(n); })`. Every read
/// of the environment goes through here; the LAPTIME_* variables through their table
/// (detail/env_vars.hpp).
inline const char* env_raw(const char* name) noexcept {
  return std::getenv(name);
}

/// Where this process sits in a distributed job, from the usual launchers' variables:
/// torchrun (RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID, SLURM_NTASKS),
/// MPICH/PMI (PMI_RANK, PMI_SIZE). Rank 0 of 1 when none is set.
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  const char* source = "none";
};

/// Reads the launchers' variables through `getenv_fn`. A malformed variable (not an integer, a
/// negative rank, a world size not above the rank) is never guessed at: it is skipped, the next
/// launcher's variable or the default (rank 0 of 1) is used, and `warnings` gets one line for it.
template <class Getenv>
RankInfo detect_rank(Getenv&& getenv_fn, std::vector<std::string>* warnings = nullptr) {
  struct Pair {
    const char* rank;
    const char* size;
  };
  constexpr Pair pairs[] = {{"RANK", "WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"},
                            {"PMI_RANK", "PMI_SIZE"}};
  auto warn = [warnings](const char* name, const char* value, const char* expected) {
    if (warnings != nullptr) warnings->push_back(malformed_env(name, value, expected));
  };
  RankInfo info;
  for (const Pair& p : pairs) {
    const char* r = getenv_fn(p.rank);
    if (r == nullptr || *r == '\0') continue;
    const auto rank = parse_int(r);
    // INT_MAX is refused too: a world size must be able to exceed the rank.
    if (!rank || *rank < 0 || *rank == INT_MAX) {
      warn(p.rank, r, "is not a rank (an integer from 0)");
      continue;
    }
    info.rank = *rank;
    info.source = p.rank;
    info.world_size = *rank + 1;
    if (const char* s = getenv_fn(p.size); s != nullptr && *s != '\0') {
      const auto size = parse_int(s);
      if (!size || *size <= *rank) {
        warn(p.size, s, "is not a world size above the rank");
      } else {
        info.world_size = *size;
      }
    }
    return info;
  }
  return info;
}

inline std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
