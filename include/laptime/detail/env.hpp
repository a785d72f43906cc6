// laptime internals: reading the environment (SPEC §7 rank labels, §8 configuration).
// The parsers take the variable's text, so they are tested without touching the environment.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"

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

/// A whole decimal int (surrounding spaces allowed); nullopt for anything else or out of range.
inline std::optional<int> parse_int(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.size() > 20) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || v < INT_MIN || v > INT_MAX) return std::nullopt;
  return static_cast<int>(v);
}

/// The value of an environment variable, nullopt when unset or empty.
inline std::optional<std::string_view> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string_view(v);
}

/// Where this process sits in a distributed job, from the usual launchers' variables:
/// torchrun (RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID, SLURM_NTASKS),
/// MPICH/PMI (PMI_RANK, PMI_SIZE). Rank 0 of 1 when none is set.
struct RankInfo {
  int rank = 0;
  int world_size = 1;
  const char* source = "none";
};

template <class Getenv>
RankInfo detect_rank(Getenv&& getenv_fn) {
  struct Pair {
    const char* rank;
    const char* size;
  };
  constexpr Pair pairs[] = {{"RANK", "WORLD_SIZE"},
                            {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"},
                            {"PMI_RANK", "PMI_SIZE"}};
  RankInfo info;
  for (const Pair& p : pairs) {
    const char* r = getenv_fn(p.rank);
    if (r == nullptr) continue;
    const auto rank = parse_int(r);
    if (!rank || *rank < 0) continue;
    info.rank = *rank;
    info.source = p.rank;
    if (const char* s = getenv_fn(p.size)) {
      if (const auto size = parse_int(s); size && *size > 0) info.world_size = *size;
    }
    if (info.world_size <= info.rank) info.world_size = info.rank + 1;
    return info;
  }
  return info;
}

inline RankInfo detect_rank() {
  return detect_rank([](const char* name) -> const char* { return std::getenv(name); });
}

inline std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
