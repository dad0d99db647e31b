#include "cli/timeline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace memcoord::cli {
namespace {

constexpr double kWidth = 1000, kHeight = 470;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 120;
constexpr const char* kColors[] = {"#3b73d9", "#e0801a", "#7a3fc0", "#1a9a4a"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double GiB(std::uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1ull << 30); }

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `ticks` ticks over `range`.
double NiceStep(double range, int ticks) {
  const double raw = range / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

struct Frame {
  double max_event;
  double max_gib;
  double x(double event) const { return kLeft + (kWidth - kLeft - kRight) * event / max_event; }
  double y(double gib) const { return kHeight - kBottom - (kHeight - kTop - kBottom) * gib / max_gib; }
};

std::string Axes(const Frame& f) {
  std::string out = fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#999"/>)"
                                "\n",
                                kLeft, kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  const double ystep = NiceStep(f.max_gib, 5);
  for (double g = 0; g <= f.max_gib + 1e-9; g += ystep) {
    out += fmt::format(
        R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="#eee"/><text x="{}" y="{:.1f}" text-anchor="end" font-size="11">{:g} GiB</text>)"
        "\n",
        kLeft, kWidth - kRight, f.y(g), f.y(g), kLeft - 6, f.y(g) + 4, g);
  }
  const double xstep = NiceStep(f.max_event, 8);
  for (double e = 0; e <= f.max_event + 1e-9; e += xstep) {
    out += fmt::format(R"(<text x="{:.1f}" y="{}" text-anchor="middle" font-size="11">{:g}</text>)"
                       "\n",
                       f.x(e), kHeight - kBottom + 16, e);
  }
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" font-size="12">allocation event</text>)"
                     "\n",
                     kLeft + (kWidth - kLeft - kRight) / 2, kHeight - kBottom + 34);
  return out;
}

std::string Polyline(const Frame& f, const std::vector<TimelinePoint>& points, bool requested,
                     const char* color, const char* dash) {
  std::string pts;
  for (const TimelinePoint& p : points) {
    pts += fmt::format("{:.1f},{:.1f} ", f.x(static_cast<double>(p.event)),
                       f.y(GiB(requested ? p.requested_bytes : p.reserved_bytes)));
  }
  return fmt::format(
      R"(<polyline fill="none" stroke="{}" stroke-width="1.6" stroke-dasharray="{}" points="{}"/>)"
      "\n",
      color, dash, pts);
}

}  // namespace

std::string TimelineSvg(const std::vector<TraceTimeline>& timelines, const std::string& title) {
  Frame f{1, 0};
  for (const TraceTimeline& t : timelines) {
    if (!t.points.empty()) f.max_event = std::max(f.max_event, static_cast<double>(t.points.back().event));
    f.max_gib = std::max({f.max_gib, GiB(t.peak_reserved_bytes), GiB(t.peak_requested_bytes)});
  }
  f.max_gib = f.max_gib <= 0 ? 1 : f.max_gib * 1.08;
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif">)"
      "\n"
      R"(<rect width="100%" height="100%" fill="#fafafa"/><text x="{}" y="24" font-size="15" font-weight="bold">{}</text>)"
      "\n",
      kWidth, kHeight, kWidth, kHeight, kLeft, Escape(title));
  out += Axes(f);
  const TraceTimeline& first = timelines.front();
  out += Polyline(f, first.points, true, "#222", "");
  for (std::size_t i = 0; i < timelines.size(); ++i) {
    out += Polyline(f, timelines[i].points, false, kColors[i % 4], i == 0 ? "" : "6 3");
  }
  // Legend, below the plot: one line per series with its peak (and its ratio to the requested peak).
  double ly = kHeight - kBottom + 58;
  auto entry = [&](const char* color, const char* dash, const std::string& text) {
    out += fmt::format(
        R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2" stroke-dasharray="{}"/><text x="{}" y="{}" font-size="12">{}</text>)"
        "\n",
        kLeft, kLeft + 24, ly - 4, ly - 4, color, dash, kLeft + 30, ly, Escape(text));
    ly += 18;
  };
  entry("#222", "", fmt::format("requested (peak {:.2f} GiB)", GiB(first.peak_requested_bytes)));
  for (std::size_t i = 0; i < timelines.size(); ++i) {
    const TraceTimeline& t = timelines[i];
    const double ratio = t.peak_requested_bytes == 0 ? 0
                                                     : static_cast<double>(t.peak_reserved_bytes) /
                                                           static_cast<double>(t.peak_requested_bytes);
    entry(kColors[i % 4], i == 0 ? "" : "6 3",
          fmt::format("reserved, {} (peak {:.2f} GiB, {:.4f} x requested)", t.label,
                      GiB(t.peak_reserved_bytes), ratio));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace memcoord::cli
