#include "cli/pickle_writer.h"

#include <cstdint>
#include <cstring>

namespace memcoord::cli {
namespace {

// Opcodes of pickle protocol 2 (Python's Lib/pickletools.py names them).
constexpr char kProto = '\x80', kStop = '.', kNone = 'N', kNewTrue = '\x88', kNewFalse = '\x89';
constexpr char kBinInt1 = 'K', kBinInt = 'J', kLong1 = '\x8a', kBinFloat = 'G', kBinUnicode = 'X';
constexpr char kEmptyList = ']', kEmptyDict = '}', kMark = '(', kAppends = 'e', kSetItems = 'u';
constexpr std::size_t kBatch = 1000;  // items per MARK ... APPENDS/SETITEMS, as Python's pickler batches

void PutU32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void PutInt(std::string& out, std::int64_t v, bool is_unsigned, std::uint64_t u) {
  if (!is_unsigned && v >= 0) {
    is_unsigned = true;
    u = static_cast<std::uint64_t>(v);
  }
  if (is_unsigned && u <= 0xff) {
    out += kBinInt1;
    out += static_cast<char>(u);
    return;
  }
  if ((is_unsigned && u <= 0x7fffffffULL) || (!is_unsigned && v >= INT32_MIN)) {
    out += kBinInt;
    PutU32(out, static_cast<std::uint32_t>(is_unsigned ? static_cast<std::int64_t>(u) : v));
    return;
  }
  // LONG1: little-endian two's complement, as few bytes as hold the sign.
  std::string bytes;
  if (is_unsigned) {
    for (std::uint64_t x = u; x != 0; x >>= 8) bytes += static_cast<char>(x & 0xff);
    if (static_cast<unsigned char>(bytes.back()) & 0x80) bytes += '\0';
  } else {
    std::uint64_t x = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i, x >>= 8) bytes += static_cast<char>(x & 0xff);
    while (bytes.size() > 1 && static_cast<unsigned char>(bytes.back()) == 0xff &&
           (static_cast<unsigned char>(bytes[bytes.size() - 2]) & 0x80)) {
      bytes.pop_back();
    }
  }
  out += kLong1;
  out += static_cast<char>(bytes.size());
  out += bytes;
}

void PutString(std::string& out, const std::string& s) {
  out += kBinUnicode;
  PutU32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

void Put(std::string& out, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      out += kNone;
      return;
    case nlohmann::json::value_t::boolean:
      out += v.get<bool>() ? kNewTrue : kNewFalse;
      return;
    case nlohmann::json::value_t::number_integer:
      PutInt(out, v.get<std::int64_t>(), false, 0);
      return;
    case nlohmann::json::value_t::number_unsigned:
      PutInt(out, 0, true, v.get<std::uint64_t>());
      return;
    case nlohmann::json::value_t::number_float: {
      const double d = v.get<double>();
      std::uint64_t bits = 0;
      std::memcpy(&bits, &d, sizeof(bits));
      out += kBinFloat;
      for (int i = 7; i >= 0; --i) out += static_cast<char>((bits >> (8 * i)) & 0xff);  // big-endian
      return;
    }
    case nlohmann::json::value_t::string:
      PutString(out, v.get_ref<const std::string&>());
      return;
    case nlohmann::json::value_t::binary:
      PutString(out, std::string(v.get_binary().begin(), v.get_binary().end()));
      return;
    case nlohmann::json::value_t::array: {
      out += kEmptyList;
      for (std::size_t i = 0; i < v.size(); i += kBatch) {
        out += kMark;
        for (std::size_t j = i; j < std::min(v.size(), i + kBatch); ++j) Put(out, v[j]);
        out += kAppends;
      }
      return;
    }
    case nlohmann::json::value_t::object: {
      out += kEmptyDict;
      std::size_t n = 0;
      for (auto it = v.begin(); it != v.end(); ++it, ++n) {
        if (n % kBatch == 0) {
          if (n > 0) out += kSetItems;
          out += kMark;
        }
        PutString(out, it.key());
        Put(out, it.value());
      }
      if (n > 0) out += kSetItems;
      return;
    }
  }
}

}  // namespace

std::string ToPickle(const nlohmann::json& value) {
  std::string out;
  out += kProto;
  out += '\x02';
  Put(out, value);
  out += kStop;
  return out;
}

}  // namespace memcoord::cli
