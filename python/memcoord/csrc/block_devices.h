// BlockDevices: which device each live block of memcoord's PyTorch shim belongs to, so that a DataPtr's
// deleter, which is handed only the block's address, frees it on its own device's pool. It replaces
// CUDAPluggableAllocator's record of every block (a map entry made and erased under a mutex per allocation).
//
// Contract:
//   - The first device a process allocates on is nobody's record: a block not recorded is that device's, so a
//     process that uses one GPU (the usual case) takes no lock and makes no entry on any allocation or free.
//   - Blocks of every other device are recorded by remember() and forgotten by take(); take() looks only once
//   a
//     block has ever been recorded.
//   - A block is remembered before its address is handed out and taken once, by its free, which happens after
//     (PyTorch orders a tensor's free after its allocation), from any thread.
// Thread-safe. Header-only and free of PyTorch, so that it is tested without a GPU
// (tests/python/block_devices_test.cc); the shim (torch_shim.cpp) keeps one for the process and never
// destroys it, since PyTorch may free tensors during exit, after the shim's statics are gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace memcoord::shim {

class BlockDevices {
 public:
  // A block at `ptr` was just allocated on `device` (>= 0): recorded unless `device` is the first device.
  void remember(void* ptr, int device) {
    if (is_first(device)) return;
    std::lock_guard lock(mu_);
    others_.insert_or_assign(ptr, device);
    recorded_.store(true, std::memory_order_release);
  }

  // The device of the block at `ptr`, which is being freed (its record, if any, is dropped). A block never
  // remembered is the first device's; -1 before any block was.
  int take(void* ptr) {
    if (recorded_.load(std::memory_order_acquire)) {
      std::lock_guard lock(mu_);
      if (auto it = others_.find(ptr); it != others_.end()) {
        const int device = it->second;
        others_.erase(it);
        return device;
      }
    }
    return first_.load(std::memory_order_relaxed);
  }

  // The device whose blocks are not recorded (-1 before the first allocation), and how many records there
  // are.
  int first_device() const { return first_.load(std::memory_order_relaxed); }
  std::size_t recorded() {
    std::lock_guard lock(mu_);
    return others_.size();
  }

 private:
  bool is_first(int device) {
    int first = first_.load(std::memory_order_relaxed);
    if (first == -1 && first_.compare_exchange_strong(first, device, std::memory_order_relaxed)) return true;
    return first == device;  // a failed exchange has loaded the device that another thread set
  }

  std::atomic<int> first_{-1};         // set once, by the first allocation
  std::atomic<bool> recorded_{false};  // whether others_ has ever held a block
  std::mutex mu_;
  std::unordered_map<void*, int> others_;  // guarded by mu_
};

}  // namespace memcoord::shim
