#include "cli/watch_view.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "common/bytes.h"

namespace memcoord::cli {
namespace {

using coordinator::ClusterEvent;
using coordinator::ClusterView;
using coordinator::WorkerRecord;
using coordinator::WorkerState;

constexpr const char* kEraseLine = "\033[K";
constexpr int kColumnWidth = 78;

struct Totals {
  std::uint64_t allocated = 0, reserved = 0, limit = 0;
};

Totals Sum(const WorkerRecord& w) {
  Totals t;
  bool unlimited = w.pools.empty();
  for (const auto& p : w.pools) {
    t.allocated += p.allocated_bytes;
    t.reserved += p.reserved_bytes;
    t.limit += p.limit_bytes;
    unlimited = unlimited || p.limit_bytes == 0;
  }
  if (unlimited) t.limit = 0;
  return t;
}

std::string Short(std::uint64_t bytes) {
  const double g = static_cast<double>(bytes) / static_cast<double>(1ull << 30);
  if (g >= 10) return fmt::format("{:.0f}G", g);
  if (g >= 1) return fmt::format("{:.1f}G", g);
  return fmt::format("{:.0f}M", static_cast<double>(bytes) / static_cast<double>(1ull << 20));
}

// "#" allocated, "=" cached, "." device free, " " used elsewhere; "|" where the limit falls.
std::string Bar(const WorkerRecord& w, const Totals& t, int cells) {
  const std::uint64_t total =
      std::max<std::uint64_t>({w.id.device_total_bytes, t.reserved + w.device_free_bytes, t.limit, 1});
  const auto cell_of = [&](std::uint64_t bytes) {
    return static_cast<int>(static_cast<double>(bytes) * cells / static_cast<double>(total) + 0.5);
  };
  std::string bar(static_cast<std::size_t>(cells), ' ');
  const int alloc = cell_of(t.allocated), reserved = cell_of(t.reserved);
  const int free_start = cells - cell_of(std::min(w.device_free_bytes, total - std::min(total, t.reserved)));
  for (int i = 0; i < cells; ++i) {
    bar[static_cast<std::size_t>(i)] = i < alloc ? '#' : i < reserved ? '=' : i >= free_start ? '.' : ' ';
  }
  if (t.limit > 0) bar[static_cast<std::size_t>(std::clamp(cell_of(t.limit), 0, cells - 1))] = '|';
  return "[" + bar + "]";
}

std::string RankLine(const WorkerRecord& w) {
  const Totals t = Sum(w);
  const char* state = w.state == WorkerState::kLive      ? "live"
                      : w.state == WorkerState::kSuspect ? "SUSP"
                                                         : "DEAD";
  if (w.state == WorkerState::kDead) {
    return fmt::format("{:>4} {} {:<{}}", w.id.rank, state, w.dead_reason.substr(0, kColumnWidth - 12),
                       kColumnWidth - 10);
  }
  return fmt::format("{:>4} {} {} {:>5}/{:<5} {:>5} s{:<7}", w.id.rank, state, Bar(w, t, 30),
                     Short(t.allocated), Short(t.reserved), t.limit ? "<" + Short(t.limit) : "", w.step);
}

std::string Clock(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  return fmt::format("{:%H:%M:%S}", tm);
}

}  // namespace

std::string RenderWatchScreen(const ClusterView& view, const std::deque<ClusterEvent>& events, int width,
                              int height) {
  width = std::max(width, 40);
  height = std::max(height, 10);
  std::vector<std::string> lines;
  int live = 0, suspect = 0, dead = 0;
  for (const WorkerRecord& w : view.workers) {
    live += w.state == WorkerState::kLive;
    suspect += w.state == WorkerState::kSuspect;
    dead += w.state == WorkerState::kDead;
  }
  lines.push_back(
      fmt::format("memcoord status --watch  {} ranks: {} live, {} suspect, {} dead  {} leak alert(s)  "
                  "[# allocated, = cached, . device free, | limit]",
                  view.workers.size(), live, suspect, dead, view.leaks.size()));
  // Ranks first (as many columns as the width allows), then leak alerts; the latest events fill the rest.
  const int leak_lines = std::min<int>(static_cast<int>(view.leaks.size()), 3);
  const int leak_block = leak_lines > 0 ? leak_lines + 1 : 0;
  const int columns = std::max(1, width / (kColumnWidth + 2));
  const int needed_rows = static_cast<int>((view.workers.size() + static_cast<std::size_t>(columns) - 1) /
                                           static_cast<std::size_t>(columns));
  const int rank_room = std::max(1, height - 2 - leak_block - 4);  // at least 3 events and their heading
  const int rows = std::min(rank_room, std::max(needed_rows, 1));
  const int shown_events =
      std::min<int>(static_cast<int>(events.size()), std::max(3, height - 2 - rows - 1 - leak_block - 1));
  for (int r = 0; r < rows; ++r) {
    std::string line;
    for (int c = 0; c < columns; ++c) {
      const std::size_t i =
          static_cast<std::size_t>(c) * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r);
      if (i >= view.workers.size()) break;
      line += fmt::format("{:<{}}", RankLine(view.workers[i]), kColumnWidth + 2);
    }
    lines.push_back(line);
  }
  if (static_cast<std::size_t>(rows * columns) < view.workers.size()) {
    lines.push_back(fmt::format("  ... {} more ranks (enlarge the terminal)",
                                view.workers.size() - static_cast<std::size_t>(rows * columns)));
  }
  if (view.workers.empty()) lines.push_back("  (no workers attached)");
  for (int i = 0; i < leak_lines; ++i) {
    const auto& l = view.leaks[static_cast<std::size_t>(i)];
    if (i == 0) lines.push_back("leaks:");
    lines.push_back(fmt::format("  LEAK? rank {} pool '{}' tag '{}': +{} per step over steps {}..{}", l.rank,
                                l.pool, l.tag, FormatBytes(static_cast<std::uint64_t>(l.bytes_per_step)),
                                l.first_step, l.last_step));
  }
  lines.push_back("events:");
  for (int i = static_cast<int>(events.size()) - shown_events; i < static_cast<int>(events.size()); ++i) {
    const ClusterEvent& e = events[static_cast<std::size_t>(i)];
    lines.push_back(fmt::format("  {} rank {:<4} {:<8} {}", Clock(e.unix_ms), e.rank, e.kind, e.detail));
  }
  if (events.empty()) lines.push_back("  (none yet)");
  std::string out = "\033[H";
  for (std::string& line : lines) {
    if (static_cast<int>(line.size()) > width) line.resize(static_cast<std::size_t>(width));
    out += line + kEraseLine + "\n";
  }
  out += "\033[J";
  return out;
}

}  // namespace memcoord::cli
