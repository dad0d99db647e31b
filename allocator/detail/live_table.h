// LiveTable: address -> what a ThreadCacheAdaptor knows of a live block it handed out (size, bytes asked,
// stream, tag, whether another stream was recorded on it); an AddressTable (address_table.h). Not
// thread-safe (each thread cache slot's lock guards its table).
#pragma once

#include <cstddef>

#include "allocator/detail/address_table.h"
#include "allocator/memory_resource.h"

namespace memcoord::detail {

struct LiveBlock {
  std::size_t size = 0;       // rounded, as handed out
  std::size_t requested = 0;  // bytes asked
  StreamId stream = kDefaultStream;
  TagId tag = kUntagged;
  bool recorded = false;  // record_stream named another stream: its reuse needs a device-side wait
};

using LiveTable = AddressTable<LiveBlock, 64>;

}  // namespace memcoord::detail
