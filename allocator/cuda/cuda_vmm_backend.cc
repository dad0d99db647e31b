#include "allocator/cuda/cuda_vmm_backend.h"

#include <cuda.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <vector>

#include "allocator/cuda/cuda_device.h"
#include "allocator/cuda/cuda_device_facts.h"
#include "allocator/cuda/cuda_driver_api.h"
#include "allocator/cuda/cuda_driver_status.h"

namespace memcoord {
namespace {

CUmemAllocationProp PinnedDeviceProp(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

}  // namespace

Result<std::unique_ptr<CudaVmmBackend>> CudaVmmBackend::Create(int device) {
  MEMCOORD_ASSIGN_OR_RETURN(CudaDeviceFacts facts, ReadCudaDeviceFacts(device));
  MEMCOORD_ASSIGN_OR_RETURN(const CudaDriverApi* api, LoadCudaDriverApi());
  ScopedCudaDevice on_device(device);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  const CUmemAllocationProp prop = PinnedDeviceProp(device);
  std::size_t minimum = 0;
  std::size_t recommended = 0;
  MEMCOORD_RETURN_IF_ERROR(
      CudaDriverStatus(api->cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                       "cuMemGetAllocationGranularity(minimum)"));
  MEMCOORD_RETURN_IF_ERROR(CudaDriverStatus(
      api->cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      "cuMemGetAllocationGranularity(recommended)"));
  const std::size_t chunk = std::max(minimum, recommended);
  if (chunk == 0 || (chunk & (chunk - 1)) != 0) {
    return Internal(
        fmt::format("cuda-vmm: device {} reports an allocation granularity of {} bytes", device, chunk));
  }
  return std::unique_ptr<CudaVmmBackend>(new CudaVmmBackend(device, std::move(facts), *api, chunk));
}

CudaVmmBackend::CudaVmmBackend(int device, CudaDeviceFacts facts, const CudaDriverApi& api,
                               std::size_t chunk_bytes)
    : device_(device), facts_(std::move(facts)), api_(api), chunk_bytes_(chunk_bytes), streams_(device) {}

CudaVmmBackend::~CudaVmmBackend() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mappings_.empty() && reserved_.empty()) return;
  spdlog::warn(
      "cuda-vmm backend (device {}) destroyed with {} mapping(s) and {} range(s) reserved; freeing them",
      device_, mappings_.size(), reserved_.size());
  ScopedCudaDevice on_device(device_);
  for (const auto& [address, mapping] : mappings_) unmap_one(address, mapping);
  mappings_.clear();
  for (const auto& [base, bytes] : reserved_) {
    const Status status = CudaDriverStatus(api_.cuMemAddressFree(base, bytes), "cuMemAddressFree");
    if (!status.ok()) spdlog::error("cuda-vmm backend (device {}): {}", device_, status.ToString());
  }
  reserved_.clear();
}

Result<std::uintptr_t> CudaVmmBackend::reserve_address(std::size_t bytes) {
  if (bytes == 0 || bytes % chunk_bytes_ != 0) {
    return InvalidArgument(
        fmt::format("cuda-vmm: reserve_address({}) must be a positive multiple of the {}-byte chunk", bytes,
                    chunk_bytes_));
  }
  ScopedCudaDevice on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  CUdeviceptr base = 0;
  const Status status = CudaDriverStatus(api_.cuMemAddressReserve(&base, bytes, chunk_bytes_, 0, 0),
                                         fmt::format("cuMemAddressReserve({})", bytes));
  if (!status.ok()) {
    // The range is validated above, so any refusal means the address space cannot hold it.
    return ResourceExhausted(
        fmt::format("cuda-vmm: cannot reserve {} bytes of address space on device {}: {}", bytes, device_,
                    status.ToString()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  reserved_.emplace(static_cast<std::uintptr_t>(base), bytes);
  return static_cast<std::uintptr_t>(base);
}

void CudaVmmBackend::free_address(std::uintptr_t base, std::size_t bytes) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = reserved_.find(base);
    if (it == reserved_.end() || it->second != bytes) {
      spdlog::error("cuda-vmm: free_address({:#x}, {}) does not name a reserved range; ignored", base, bytes);
      return;
    }
    reserved_.erase(it);
  }
  ScopedCudaDevice on_device(device_);
  const Status status = CudaDriverStatus(api_.cuMemAddressFree(base, bytes), "cuMemAddressFree");
  if (!status.ok()) spdlog::error("cuda-vmm backend (device {}): {}", device_, status.ToString());
}

Status CudaVmmBackend::check_range_locked(std::uintptr_t address, std::size_t bytes,
                                          bool must_be_unmapped) const {
  if (bytes == 0 || address % chunk_bytes_ != 0 || bytes % chunk_bytes_ != 0) {
    return InvalidArgument(fmt::format("cuda-vmm: range [{:#x}, +{}) is not aligned to the {}-byte chunk",
                                       address, bytes, chunk_bytes_));
  }
  auto it = reserved_.upper_bound(address);
  if (it == reserved_.begin()) {
    return InvalidArgument(
        fmt::format("cuda-vmm: range [{:#x}, +{}) is not inside a reserved range", address, bytes));
  }
  --it;
  if (address + bytes > it->first + it->second) {
    return InvalidArgument(
        fmt::format("cuda-vmm: range [{:#x}, +{}) runs past its reserved range [{:#x}, +{})", address, bytes,
                    it->first, it->second));
  }
  if (must_be_unmapped) {
    auto next = mappings_.lower_bound(address);
    if (next != mappings_.end() && next->first < address + bytes) {
      return InvalidArgument(fmt::format("cuda-vmm: {:#x} is already mapped", next->first));
    }
    if (next != mappings_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > address) {
      return InvalidArgument(fmt::format("cuda-vmm: {:#x} is already mapped", address));
    }
  }
  return Status::Ok();
}

void CudaVmmBackend::unmap_one(std::uintptr_t address, const Mapping& mapping) noexcept {
  Status status = CudaDriverStatus(api_.cuMemUnmap(address, mapping.bytes), "cuMemUnmap");
  if (!status.ok()) spdlog::error("cuda-vmm backend (device {}): {}", device_, status.ToString());
  status = CudaDriverStatus(api_.cuMemRelease(mapping.handle), "cuMemRelease");
  if (!status.ok()) spdlog::error("cuda-vmm backend (device {}): {}", device_, status.ToString());
}

Status CudaVmmBackend::map(std::uintptr_t address, std::size_t bytes) {
  const std::size_t pieces[] = {bytes};
  return map_pieces(address, pieces);
}

Status CudaVmmBackend::map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces) {
  if (pieces.empty())
    return InvalidArgument(fmt::format("cuda-vmm: map_pieces at {:#x} of no pieces", address));
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::size_t piece : pieces) {
      MEMCOORD_RETURN_IF_ERROR(check_range_locked(address + bytes, piece, /*must_be_unmapped=*/true));
      bytes += piece;
    }
  }
  ScopedCudaDevice on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  auto with_context = [&](Status status) {
    const std::uint64_t free_bytes = ReadCudaDeviceInfo("cuda-vmm", device_, facts_).free_bytes;
    return status.WithContext(
        fmt::format("cuda-vmm: mapping {} bytes at {:#x} on device {} ({} bytes free): ", bytes, address,
                    device_, free_bytes));
  };
  std::vector<std::pair<std::uintptr_t, Mapping>> made;
  made.reserve(pieces.size());
  Status status = create_and_map(address, pieces, made);
  if (status.ok()) {
    // One access grant for the whole run. Granted per unit, it was the costliest of the three calls: 605
    // cuMemSetAccess took 24.6 ms of a GPT-2 bf16 first step's 41 ms in memory calls on the H200
    // (cuMemCreate 11.9).
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = CudaDriverStatus(api_.cuMemSetAccess(address, bytes, &access, 1), "cuMemSetAccess");
  }
  if (!status.ok()) {
    for (const auto& [start, mapping] : made) unmap_one(start, mapping);
    return with_context(status);
  }
  std::lock_guard<std::mutex> lock(mu_);
  mappings_.insert(made.begin(), made.end());
  mapped_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::Ok();
}

Status CudaVmmBackend::create_and_map(std::uintptr_t address, std::span<const std::size_t> pieces,
                                      std::vector<std::pair<std::uintptr_t, Mapping>>& made) {
  const CUmemAllocationProp prop = PinnedDeviceProp(device_);
  for (const std::size_t piece : pieces) {
    Mapping mapping{0, piece};
    MEMCOORD_RETURN_IF_ERROR(
        CudaDriverStatus(api_.cuMemCreate(&mapping.handle, piece, &prop, 0), "cuMemCreate"));
    const Status status = CudaDriverStatus(api_.cuMemMap(address, piece, 0, mapping.handle, 0), "cuMemMap");
    if (!status.ok()) {
      const Status released = CudaDriverStatus(api_.cuMemRelease(mapping.handle), "cuMemRelease");
      if (!released.ok()) spdlog::error("cuda-vmm backend (device {}): {}", device_, released.ToString());
      return status;
    }
    made.emplace_back(address, mapping);
    address += piece;
  }
  return Status::Ok();
}

void CudaVmmBackend::unmap(std::uintptr_t address, std::size_t bytes) noexcept {
  std::vector<std::pair<std::uintptr_t, Mapping>> taken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes == 0 || address % chunk_bytes_ != 0 || bytes % chunk_bytes_ != 0) {
      spdlog::error("cuda-vmm: unmap({:#x}, {}) is not chunk-aligned; ignored", address, bytes);
      return;
    }
    // Only whole mappings inside the range: the driver cannot unmap part of one.
    auto it = mappings_.lower_bound(address);
    if (it != mappings_.begin() && std::prev(it)->first + std::prev(it)->second.bytes > address) {
      spdlog::error("cuda-vmm: unmap({:#x}, {}) starts inside the mapping at {:#x}; that mapping is kept",
                    address, bytes, std::prev(it)->first);
    }
    std::uintptr_t covered = 0;
    while (it != mappings_.end() && it->first < address + bytes) {
      if (it->first + it->second.bytes > address + bytes) {
        spdlog::error("cuda-vmm: unmap({:#x}, {}) ends inside the mapping at {:#x}; that mapping is kept",
                      address, bytes, it->first);
        break;
      }
      covered += it->second.bytes;
      taken.emplace_back(*it);
      it = mappings_.erase(it);
    }
    if (covered != bytes && taken.size() > 0) {
      spdlog::error("cuda-vmm: unmap({:#x}, {}) covered {} mapped bytes", address, bytes, covered);
    }
    if (taken.empty()) spdlog::error("cuda-vmm: unmap({:#x}, {}) found nothing mapped", address, bytes);
  }
  ScopedCudaDevice on_device(device_);
  std::uint64_t released = 0;
  for (const auto& [start, mapping] : taken) {
    unmap_one(start, mapping);
    released += mapping.bytes;
  }
  mapped_bytes_.fetch_sub(released, std::memory_order_relaxed);
}

Result<void*> CudaVmmBackend::do_allocate(std::size_t bytes) {
  if (bytes > facts_.total_bytes) {
    return ResourceExhausted(
        fmt::format("cuda-vmm backend: cannot allocate {} bytes on device {} ({}): the device "
                    "has {} bytes in all",
                    bytes, device_, facts_.name, facts_.total_bytes));
  }
  const std::size_t rounded = (bytes + chunk_bytes_ - 1) / chunk_bytes_ * chunk_bytes_;
  MEMCOORD_ASSIGN_OR_RETURN(std::uintptr_t base, reserve_address(rounded));
  const Status mapped = map(base, rounded);
  if (!mapped.ok()) {
    free_address(base, rounded);
    return mapped;
  }
  std::lock_guard<std::mutex> lock(mu_);
  segments_.emplace(base, rounded);
  return reinterpret_cast<void*>(base);
}

void CudaVmmBackend::do_release(void* ptr, std::size_t bytes) noexcept {
  const auto base = reinterpret_cast<std::uintptr_t>(ptr);
  std::size_t rounded = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = segments_.find(base);
    if (it == segments_.end()) {
      spdlog::error("cuda-vmm: release({}, {}) of a pointer that is not a segment; ignored", ptr, bytes);
      return;
    }
    rounded = it->second;
    segments_.erase(it);
  }
  unmap(base, rounded);
  free_address(base, rounded);
}

DeviceInfo CudaVmmBackend::device_info() { return ReadCudaDeviceInfo("cuda-vmm", device_, facts_); }

}  // namespace memcoord
