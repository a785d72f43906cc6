// laptime internals: parsers for the /proc files the resource sampler reads.
//
// Pure functions over std::string_view, kept apart from the OS access (resources_walk.hpp,
// resources_sampler.hpp) so that every rule below is tested against fixture files
// (tests/fixtures/proc). Nothing here opens a file.
//
// One rule runs through all of them: the kernel terminates every field it writes (with a space or
// a newline), so text after the last separator is a truncated read and is never taken as a value.
// "12" cut from "1234" would otherwise be a plausible, wrong number.
#pragma once

#include <sys/types.h>

#include <charconv>
#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {
namespace procfs {

/// True for the separators the kernel writes between fields.
constexpr bool is_separator(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n';
}

/// A decimal unsigned number that is the whole of `text` (no sign, no blanks), or nullopt.
inline std::optional<std::uint64_t> parse_u64(std::string_view text) noexcept {
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

/// A process or thread id (a directory name under /proc, a field of a children file): a positive
/// decimal number that fits pid_t, or nullopt ("self", "net", "-1", "").
inline std::optional<pid_t> parse_pid(std::string_view text) noexcept {
  const auto value = parse_u64(text);
  if (!value || *value == 0 || *value > static_cast<std::uint64_t>(INT_MAX)) return std::nullopt;
  return static_cast<pid_t>(*value);
}

/// Walks the complete fields of a text (see the rule at the top of this file).
class FieldReader {
 public:
  explicit FieldReader(std::string_view text) noexcept : rest_(text) {}

  /// The next complete field; false at the end of the text or at a truncated last field.
  bool next(std::string_view& field) noexcept {
    std::size_t begin = 0;
    while (begin < rest_.size() && is_separator(rest_[begin])) ++begin;
    std::size_t end = begin;
    while (end < rest_.size() && !is_separator(rest_[end])) ++end;
    if (end == begin || end == rest_.size()) {  // nothing left, or no separator after the field
      truncated_ = end != begin;
      rest_ = {};
      return false;
    }
    field = rest_.substr(begin, end - begin);
    rest_.remove_prefix(end);
    return true;
  }

  /// Skips `n` complete fields; false if there were fewer.
  bool skip(int n) noexcept {
    std::string_view ignored;
    for (int i = 0; i < n; ++i) {
      if (!next(ignored)) return false;
    }
    return true;
  }

  /// Whether the text ended inside a field (only meaningful once next() returned false).
  bool truncated() const noexcept { return truncated_; }

 private:
  std::string_view rest_;
  bool truncated_ = false;
};

// ---- /proc/stat ---------------------------------------------------------------------------------

/// Machine-wide CPU time from the "cpu" line of /proc/stat, in clock ticks (USER_HZ).
struct SystemTicks {
  std::uint64_t busy = 0;   ///< total - idle - iowait
  std::uint64_t total = 0;  ///< user+nice+system+idle+iowait+irq+softirq+steal
};

/// Parses the aggregate "cpu" line of /proc/stat ("cpu  user nice system idle iowait irq softirq
/// steal guest guest_nice"). At least the first four fields must be there (older kernels print
/// fewer; the missing ones are 0). guest and guest_nice are already counted inside user and nice
/// by the kernel, so they are left out of the total rather than counted twice.
/// nullopt when the line is missing, not terminated, short or not numeric.
inline std::optional<SystemTicks> parse_system_cpu(std::string_view proc_stat) noexcept {
  while (!proc_stat.empty()) {
    const std::size_t eol = proc_stat.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;  // truncated line
    const std::string_view line = proc_stat.substr(0, eol + 1);
    proc_stat.remove_prefix(eol + 1);

    FieldReader fields(line);
    std::string_view field;
    if (!fields.next(field) || field != "cpu") continue;

    constexpr int kCounted = 8;  // user .. steal; guest and guest_nice follow
    std::uint64_t values[kCounted] = {};
    int count = 0;
    while (fields.next(field)) {
      const auto value = parse_u64(field);
      if (!value) return std::nullopt;
      if (count < kCounted) values[count] = *value;
      ++count;
    }
    if (count < 4) return std::nullopt;
    SystemTicks ticks;
    for (const std::uint64_t v : values) ticks.total += v;
    const std::uint64_t idle = values[3] + values[4];
    ticks.busy = ticks.total - idle;
    return ticks;
  }
  return std::nullopt;
}

/// Number of "cpuN" lines in /proc/stat (the CPUs online when it was read); 0 if none.
inline int count_cpu_lines(std::string_view proc_stat) noexcept {
  int cpus = 0;
  while (!proc_stat.empty()) {
    const std::size_t eol = proc_stat.find('\n');
    if (eol == std::string_view::npos) break;  // a truncated last line is not counted
    const std::string_view line = proc_stat.substr(0, eol);
    if (line.size() > 3 && line.substr(0, 3) == "cpu" && line[3] >= '0' && line[3] <= '9') ++cpus;
    proc_stat.remove_prefix(eol + 1);
  }
  return cpus;
}

// ---- /proc/<pid>/stat ---------------------------------------------------------------------------

/// The fields of /proc/<pid>/stat the sampler uses. Times are in clock ticks (USER_HZ).
struct ProcessStat {
  pid_t pid = 0;
  std::string_view comm;  ///< the command name, without the enclosing parentheses
  char state = '?';
  pid_t ppid = 0;
  std::uint64_t cminflt = 0, cmajflt = 0;  ///< page faults of reaped children
  std::uint64_t utime = 0, stime = 0;      ///< this process, all its threads
  std::uint64_t cutime = 0, cstime = 0;    ///< its children that it has waited for
  std::uint64_t num_threads = 0;
  std::uint64_t start_time = 0;  ///< clock ticks after boot at which it started (0: not read)

  /// CPU time of the process and of every descendant it (or they) reaped.
  std::uint64_t cpu_ticks() const noexcept { return utime + stime + cutime + cstime; }

  /// Changes whenever the process reaps a child: every child that ran took at least one page
  /// fault, even one with no CPU tick, so a reaped child always moves this.
  std::uint64_t reap_fingerprint() const noexcept { return cutime + cstime + cminflt + cmajflt; }
};

/// Parses /proc/<pid>/stat: "pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
/// majflt cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime ...".
/// starttime (with the pid, a process's identity: pids are reused) is read where it is complete
/// and left 0 otherwise; the fields before it are required. comm may hold spaces
/// and parentheses ("(a) (b)" prints as "((a) (b))"), so it runs from the first '(' to the LAST
/// ')' — the fields after it are numbers and never contain one.
/// nullopt when truncated, short or not numeric where a used field is.
inline std::optional<ProcessStat> parse_process_stat(std::string_view text) noexcept {
  const std::size_t open = text.find('(');
  const std::size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open ||
      open < 2 || text[open - 1] != ' ') {
    return std::nullopt;
  }
  ProcessStat st;
  const auto pid = parse_pid(text.substr(0, open - 1));
  if (!pid) return std::nullopt;
  st.pid = *pid;
  st.comm = text.substr(open + 1, close - open - 1);

  FieldReader fields(text.substr(close + 1));
  std::string_view field;
  if (!fields.next(field) || field.size() != 1) return std::nullopt;
  st.state = field[0];

  // After state: ppid(0) pgrp session tty_nr tpgid flags minflt cminflt(7) majflt cmajflt(9)
  // utime(10) stime cutime cstime(13) priority nice num_threads(16). tty_nr, tpgid, priority and
  // nice may be negative; they are skipped, not parsed.
  const auto next_u64 = [&fields, &field]() -> std::optional<std::uint64_t> {
    if (!fields.next(field)) return std::nullopt;
    return parse_u64(field);
  };
  const auto ppid = next_u64();
  if (!ppid || *ppid > static_cast<std::uint64_t>(INT_MAX)) return std::nullopt;
  st.ppid = static_cast<pid_t>(*ppid);
  if (!fields.skip(6)) return std::nullopt;  // pgrp .. minflt
  const auto cminflt = next_u64();
  if (!fields.skip(1)) return std::nullopt;  // majflt
  const auto cmajflt = next_u64();
  const auto utime = next_u64();
  const auto stime = next_u64();
  const auto cutime = next_u64();
  const auto cstime = next_u64();
  if (!cminflt || !cmajflt || !utime || !stime || !cutime || !cstime) return std::nullopt;
  if (!fields.skip(2)) return std::nullopt;  // priority, nice
  const auto threads = next_u64();
  if (!threads) return std::nullopt;
  st.cminflt = *cminflt;
  st.cmajflt = *cmajflt;
  st.utime = *utime;
  st.stime = *stime;
  st.cutime = *cutime;
  st.cstime = *cstime;
  st.num_threads = *threads;
  if (fields.skip(1)) {  // itrealvalue
    if (const auto start = next_u64()) st.start_time = *start;
  }
  return st;
}

// ---- /proc/<pid>/io -----------------------------------------------------------------------------

/// Byte counters of /proc/<pid>/io.
struct IoCounters {
  std::uint64_t rchar = 0;        ///< bytes passed to read()-like calls, page cache hits included
  std::uint64_t wchar = 0;        ///< bytes passed to write()-like calls
  std::uint64_t read_bytes = 0;   ///< bytes fetched from storage on this process's behalf
  std::uint64_t write_bytes = 0;  ///< bytes this process caused to be sent to storage

  IoCounters& operator+=(const IoCounters& o) noexcept {
    rchar += o.rchar;
    wchar += o.wchar;
    read_bytes += o.read_bytes;
    write_bytes += o.write_bytes;
    return *this;
  }
};

/// Parses /proc/<pid>/io ("rchar: 123\nwchar: ...\n"). All four of rchar, wchar, read_bytes and
/// write_bytes must be there with complete numeric values; other keys are ignored.
inline std::optional<IoCounters> parse_io(std::string_view text) noexcept {
  IoCounters io;
  unsigned seen = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    if (eol == std::string_view::npos) break;  // truncated last line
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);

    std::uint64_t* slot = nullptr;
    unsigned bit = 0;
    if (key == "rchar") {
      slot = &io.rchar;
      bit = 1;
    } else if (key == "wchar") {
      slot = &io.wchar;
      bit = 2;
    } else if (key == "read_bytes") {
      slot = &io.read_bytes;
      bit = 4;
    } else if (key == "write_bytes") {
      slot = &io.write_bytes;
      bit = 8;
    } else {
      continue;
    }
    const auto parsed = parse_u64(value);
    if (!parsed) return std::nullopt;
    *slot = *parsed;
    seen |= bit;
  }
  if (seen != 15) return std::nullopt;
  return io;
}

// ---- children -----------------------------------------------------------------------------------

/// Appends the ids in /proc/<pid>/task/<tid>/children ("101 102 ") to `out`. An empty file is a
/// thread with no children. Returns false, leaving `out` as it was, on anything but complete
/// positive ids.
inline bool parse_pid_list(std::string_view text, std::vector<pid_t>& out) {
  const std::size_t old_size = out.size();
  FieldReader fields(text);
  std::string_view field;
  while (fields.next(field)) {
    const auto pid = parse_pid(field);
    if (!pid) {
      out.resize(old_size);
      return false;
    }
    out.push_back(*pid);
  }
  if (fields.truncated()) {
    out.resize(old_size);
    return false;
  }
  return true;
}

/// Appends the children of `parent` to `out`, from (pid, ppid) pairs gathered by scanning
/// /proc/*/stat (the fallback where the kernel has no children files).
inline void children_from_ppids(pid_t parent, const std::vector<std::pair<pid_t, pid_t>>& pid_ppid,
                                std::vector<pid_t>& out) {
  for (const auto& [pid, ppid] : pid_ppid) {
    if (ppid == parent && pid != parent) out.push_back(pid);
  }
}

}  // namespace procfs
}  // namespace detail
LAPTIME_END_NAMESPACE
