#include "allocator/trace.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/message_text.h"

namespace memcoord {
namespace {

constexpr std::string_view kAccepted =
    "accepted: memcoord/PyTorch trace lines 'a|f|r|S HEXADDR SIZE STREAM [tTHREAD]' (plain or .gz) or an RMM "
    "CSV log "
    "with "
    "header 'Thread,Time,Action,Pointer,Size,Stream'";

Result<std::string> ReadAll(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads plain files too
  if (f == nullptr) return NotFound(fmt::format("cannot open trace file '{}'", path));
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const int n = gzread(f, buffer, sizeof buffer);
    if (n < 0) {
      int err = 0;
      const std::string message = gzerror(f, &err);
      gzclose(f);
      return DataLoss(fmt::format("trace file '{}' is corrupt: {}", path, message));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  // zlib reports a gzip stream cut short only at close or through gzerror after EOF.
  int err = 0;
  const std::string message = gzerror(f, &err);
  const int close_status = gzclose(f);
  if (err != Z_OK && err != Z_STREAM_END) {
    return DataLoss(fmt::format("trace file '{}' is truncated or corrupt: {}", path, message));
  }
  if (close_status == Z_BUF_ERROR) {
    return DataLoss(fmt::format("trace file '{}' is truncated (the gzip stream ends early)", path));
  }
  return text;
}

bool ParseHex(std::string_view s, std::uint64_t* out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseDec(std::string_view s, std::uint64_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, 10);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep, bool skip_empty) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    std::string_view part = s.substr(start, end - start);
    if (!skip_empty || !part.empty()) out.push_back(part);
    start = end + 1;
  }
  return out;
}

// Turns address-level events into slot events, checking that frees name live addresses, and numbers the
// threads densely.
class SlotBuilder {
 public:
  explicit SlotBuilder(Trace& trace) : trace_(trace) {}

  // Events added next are those of the thread the trace calls `name` (numbered densely as they appear);
  // INVALID_ARGUMENT past kMaxTraceThreads.
  Status thread(std::string_view name) {
    auto it = threads_.find(std::string(name));
    if (it == threads_.end()) {
      if (threads_.size() == kMaxTraceThreads) {
        return InvalidArgument(fmt::format("thread '{}' is past the {} threads a trace may name",
                                           ShortForMessage(name), kMaxTraceThreads));
      }
      it = threads_.emplace(std::string(name), static_cast<std::uint16_t>(threads_.size())).first;
      trace_.threads = static_cast<std::uint32_t>(threads_.size());
    }
    thread_ = it->second;
    return Status::Ok();
  }

  Status alloc(std::uint64_t address, std::uint64_t bytes, StreamId stream) {
    if (bytes == 0) return InvalidArgument("allocation of 0 bytes");
    auto [it, inserted] = live_.try_emplace(address, 0);
    if (!inserted) return InvalidArgument(fmt::format("allocation at {:#x}, which is still live", address));
    std::uint32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = trace_.slots++;
      slot_bytes_.push_back(0);
    }
    it->second = slot;
    slot_bytes_[slot] = bytes;
    live_bytes_ += bytes;
    if (live_bytes_ > trace_.peak_live_bytes) trace_.peak_live_bytes = live_bytes_;
    trace_.events.push_back({TraceEvent::Kind::kAlloc, thread_, slot, bytes, stream});
    ++trace_.allocations;
    return Status::Ok();
  }

  Status free(std::uint64_t address, StreamId stream) {
    auto it = live_.find(address);
    if (it == live_.end()) return InvalidArgument(fmt::format("free of {:#x}, which is not live", address));
    const std::uint32_t slot = it->second;
    live_.erase(it);
    live_bytes_ -= slot_bytes_[slot];
    free_slots_.push_back(slot);
    trace_.events.push_back({TraceEvent::Kind::kFree, thread_, slot, 0, stream});
    ++trace_.frees;
    return Status::Ok();
  }

 private:
  Trace& trace_;
  std::unordered_map<std::uint64_t, std::uint32_t> live_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::uint64_t> slot_bytes_;
  std::uint64_t live_bytes_ = 0;
  std::unordered_map<std::string, std::uint16_t> threads_;
  std::uint16_t thread_ = 0;  // of the events added next
};

Status LineError(const std::string& name, std::size_t line, std::string_view what) {
  return InvalidArgument(fmt::format("trace '{}' line {}: {}; {}", name, line, what, kAccepted));
}

Result<Trace> ParseMemcoord(const std::string& text, const std::string& name) {
  Trace trace;
  trace.format = "memcoord";
  SlotBuilder slots(trace);
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = Trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    if (line.front() == '#') {
      const std::size_t w = line.find("workload=");
      if (w != std::string_view::npos && trace.workload.empty()) {
        std::string_view rest = line.substr(w + 9);
        trace.workload = std::string(rest.substr(0, rest.find_first_of(" ;")));
      }
      continue;
    }
    const std::vector<std::string_view> f = Split(line, ' ', true);
    if ((f.size() != 4 && f.size() != 5) || f[0].size() != 1) {
      return LineError(name, line_number, fmt::format("cannot read '{}'", ShortForMessage(line)));
    }
    std::uint64_t thread = 0;
    if (f.size() == 5 && (!f[4].starts_with('t') || !ParseDec(f[4].substr(1), &thread))) {
      return LineError(name, line_number,
                       fmt::format("bad thread '{}' (a thread is t0, t1, ...)", ShortForMessage(f[4])));
    }
    std::uint64_t address = 0, bytes = 0, stream = 0;
    if (!ParseHex(f[1], &address) || !ParseDec(f[2], &bytes) || !ParseDec(f[3], &stream)) {
      return LineError(name, line_number,
                       fmt::format("bad address, size or stream in '{}'", ShortForMessage(line)));
    }
    // By number: "t01" and "t1" name one thread.
    Status s = slots.thread(fmt::format("t{}", thread));
    if (!s.ok()) return LineError(name, line_number, s.message());
    switch (f[0][0]) {
      case 'a':
        s = slots.alloc(address, bytes, stream);
        break;
      case 'f':
        s = slots.free(address, stream);
        break;
      case 'r':
      case 'S':
        break;
      default:
        return LineError(name, line_number, fmt::format("unknown event code '{}'", ShortForMessage(f[0])));
    }
    if (!s.ok()) return LineError(name, line_number, s.message());
  }
  if (trace.events.empty())
    return InvalidArgument(fmt::format("trace '{}' has no allocation events; {}", name, kAccepted));
  return trace;
}

Result<Trace> ParseRmmCsv(const std::string& text, const std::string& name) {
  Trace trace;
  trace.format = "rmm-csv";
  trace.workload = "rmm";
  SlotBuilder slots(trace);
  std::size_t line_number = 0;
  std::size_t start = 0;
  int action_col = -1, pointer_col = -1, size_col = -1, stream_col = -1, thread_col = -1;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line = Trim(std::string_view(text).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty()) continue;
    const std::vector<std::string_view> f = Split(line, ',', false);
    if (action_col < 0) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        const std::string_view h = Trim(f[i]);
        if (h == "Action") action_col = static_cast<int>(i);
        if (h == "Pointer") pointer_col = static_cast<int>(i);
        if (h == "Size") size_col = static_cast<int>(i);
        if (h == "Stream") stream_col = static_cast<int>(i);
        if (h == "Thread") thread_col = static_cast<int>(i);
      }
      if (action_col < 0 || pointer_col < 0 || size_col < 0) {
        return LineError(name, line_number, "RMM CSV header lacks Action, Pointer or Size");
      }
      continue;
    }
    const int needed = std::max({action_col, pointer_col, size_col, stream_col, thread_col});
    if (static_cast<int>(f.size()) <= needed) return LineError(name, line_number, "too few columns");
    const std::string_view action = Trim(f[static_cast<std::size_t>(action_col)]);
    std::uint64_t address = 0, bytes = 0, stream = 0;
    if (!ParseHex(Trim(f[static_cast<std::size_t>(pointer_col)]), &address) ||
        !ParseDec(Trim(f[static_cast<std::size_t>(size_col)]), &bytes)) {
      return LineError(name, line_number, fmt::format("bad pointer or size in '{}'", ShortForMessage(line)));
    }
    if (stream_col >= 0) {
      const std::string_view st = Trim(f[static_cast<std::size_t>(stream_col)]);
      if (!ParseHex(st, &stream) && !ParseDec(st, &stream)) {
        return LineError(name, line_number, fmt::format("bad stream '{}'", ShortForMessage(st)));
      }
    }
    Status s = slots.thread(thread_col >= 0 ? Trim(f[static_cast<std::size_t>(thread_col)]) : "0");
    if (!s.ok()) return LineError(name, line_number, s.message());
    if (action == "allocate") {
      s = slots.alloc(address, bytes, stream);
    } else if (action == "free") {
      s = slots.free(address, stream);
    } else if (action == "allocate failure") {
      continue;
    } else {
      return LineError(name, line_number, fmt::format("unknown action '{}'", ShortForMessage(action)));
    }
    if (!s.ok()) return LineError(name, line_number, s.message());
  }
  if (trace.events.empty())
    return InvalidArgument(fmt::format("trace '{}' has no allocation events; {}", name, kAccepted));
  return trace;
}

}  // namespace

Result<Trace> ParseTrace(const std::string& text, const std::string& name) {
  // A UTF-8 byte-order mark (editors on Windows write one) is not part of the trace.
  if (text.starts_with("\xEF\xBB\xBF")) return ParseTrace(text.substr(3), name);
  std::size_t first = 0;
  while (first < text.size() && (text[first] == ' ' || text[first] == '\n' || text[first] == '\r')) ++first;
  const std::string_view head = std::string_view(text).substr(first, 200);
  if (head.starts_with("Thread,") || head.find("Action") != std::string_view::npos) {
    return ParseRmmCsv(text, name);
  }
  if (!head.empty() &&
      (head[0] == '#' || ((head[0] == 'a' || head[0] == 'f' || head[0] == 'r' || head[0] == 'S') &&
                          head.size() > 1 && head[1] == ' '))) {
    return ParseMemcoord(text, name);
  }
  return InvalidArgument(fmt::format("trace '{}' is in an unknown format (starts with '{}'); {}", name,
                                     head.substr(0, std::min<std::size_t>(head.size(), 24)), kAccepted));
}

Result<Trace> ReadTrace(const std::string& path) {
  MEMCOORD_ASSIGN_OR_RETURN(std::string text, ReadAll(path));
  // Pickle protocol 2 and later open with PROTO (0x80): most likely a PyTorch memory snapshot.
  if (!text.empty() && static_cast<unsigned char>(text[0]) == 0x80) {
    constexpr const char* kPickle =
        "trace '{}' is a Python pickle (a PyTorch memory snapshot from torch.cuda.memory._dump_snapshot?), "
        "not a trace: convert it with `python3 -m memcoord.snapshot_trace {}` (the memcoord Python package) "
        "and replay the .trace.gz it writes";
    return InvalidArgument(fmt::format(fmt::runtime(kPickle), path, path));
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(text.size(), 4096); ++i) {
    if (text[i] == '\0') {
      return InvalidArgument(fmt::format("trace '{}' is binary garbage, not text; {}", path, kAccepted));
    }
  }
  return ParseTrace(text, path);
}

}  // namespace memcoord
