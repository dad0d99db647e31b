#include "allocator/caching_pool.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "allocator/core_pool.h"
#include "allocator/limit_adaptor.h"
#include "allocator/recorder_adaptor.h"
#include "allocator/stats_adaptor.h"
#include "allocator/tag_adaptor.h"
#include "allocator/thread_cache_adaptor.h"
#include "allocator/thread_safe_adaptor.h"
#include "allocator/trace_recorder.h"
#include "common/bytes.h"

namespace memcoord {
// The stack, bottom up. Members are declared in that order, so each layer outlives the ones above it.
class CachingPool::Impl {
 public:
  Impl(DeviceBackend& backend, PoolOptions options)
      : backend_(backend),
        owner_(fmt::format("pool '{}'", options.name)),
        limit_(backend, options.limit_bytes, owner_),
        core_(limit_, std::move(options)),
        stats_(core_),
        tags_(stats_, owner_),
        locked_(stats_),
        cache_(
            locked_, LiveFigures{&stats_.allocated_counter(), &stats_.requested_counter()},
            ThreadCacheLimits{core_.options().thread_cache_bytes, core_.options().thread_cache_block_bytes,
                              core_.options().thread_cache_fence, core_.options().thread_cache_idle_misses},
            owner_),
        oom_(cache_, [this](std::size_t bytes) { return oom_event(bytes); }) {}

  // The top of the stack is oom_ while a hook is set, else cache_; both are called by their concrete
  // types, so a thread-cache hit makes no virtual call, and a hit below it one, the lock's into whichever
  // layer is under it (two while a recorder is attached: the recorder's upstream is the stats or the tag
  // layer, known only at run time).
  CorePool& core() { return core_; }

  Result<void*> allocate(std::size_t bytes, StreamId stream, TagId tag) {
    // Checked here (again in the core and the tag layer) so bad input never takes the lock, and in the
    // order users have always seen.
    if (!CorePool::ValidSize(bytes)) return CorePool::CheckSize(name(), bytes);
    if (tag != kUntagged && !tags_.known(tag)) return tags_.unknown_tag(tag);
    Allocation a;
    Status error;
    const bool ok = hooked_.load(std::memory_order_acquire)
                        ? oom_.try_allocate(bytes, stream, tag, a, error)
                        : cache_.try_allocate(bytes, stream, tag, a, error);
    if (ok) return a.ptr;
    if (error.code() != StatusCode::kResourceExhausted) return error;
    ooms_.fetch_add(1, std::memory_order_relaxed);
    return oom_status(bytes, stream, error);
  }

  // No OOM layer: a refusal is not an out-of-memory.
  void* allocate_cached(std::size_t bytes, StreamId stream, TagId tag) {
    if (!CorePool::ValidSize(bytes) || (tag != kUntagged && !tags_.known(tag))) return nullptr;
    Allocation a;
    return cache_.try_allocate_cached(bytes, stream, tag, a) ? a.ptr : nullptr;
  }

  Status deallocate(void* ptr) {
    if (ptr == nullptr) return InvalidArgument(fmt::format("{}: free of a null pointer", owner_));
    Allocation freed;
    Status error;
    if (cache_.try_deallocate(ptr, freed, error)) return Status::Ok();
    return error;
  }

  bool free_cached(void* ptr, StreamId stream) { return cache_.try_free_cached(ptr, stream); }

  Status record_stream(void* ptr, StreamId stream) { return cache_.record_stream(ptr, stream); }

  TrimResult trim(std::uint64_t target) {
    const auto start = std::chrono::steady_clock::now();
    TrimResult result = cache_.trim(target);  // thread caches first
    result.duration_ms =                      // lock wait included, as callers experience it
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  Status set_limit(std::uint64_t limit) {
    cache_.flush();
    auto lock = locked_.lock();
    // Blocks threads cached again since the flush are not allocated (and stay out of the trim below).
    const std::uint64_t allocated =
        core_.allocated_bytes() - std::min(core_.allocated_bytes(), cache_.cached_bytes());
    if (limit != 0 && limit < allocated) {
      return FailedPrecondition(
          fmt::format("{}: limit {} ({} bytes) is below the {} bytes live in the pool; free memory first or "
                      "choose a limit of at least {}",
                      owner_, FormatBytes(limit), limit, allocated, FormatBytes(allocated)));
    }
    if (limit != 0 && core_.reserved_bytes() > limit) (void)core_.trim(limit);
    limit_.set_limit(limit);
    return Status::Ok();
  }

  void set_oom_hook(OomHook hook) {
    const bool attached = static_cast<bool>(hook);
    auto lock = locked_.lock();  // orders concurrent set_oom_hook calls
    oom_.set_hook(std::move(hook));
    hooked_.store(attached, std::memory_order_release);
  }

  void set_recorder(TraceRecorder* recorder) {
    set_sink([&] { recorder_ = recorder; });
  }

  void set_history(TraceSink* history) {
    set_sink([&] { history_ = history; });
  }

  Result<TagId> tag(std::string_view name) {
    if (name.empty()) return InvalidArgument("tag name must not be empty");
    auto lock = locked_.lock();
    Result<TagId> id = tags_.tag(name);
    if (id.ok()) rewire();
    return id;
  }

  PoolStats stats(bool wait_for_lock = true) const {
    PoolStats s;
    {
      // The cache's figures are computed now, from the free blocks, under the lock; without it, the last.
      auto lock = wait_for_lock ? locked_.lock() : locked_.try_lock();
      if (lock.owns_lock()) {
        core_.fill_cache_stats(s);
        last_largest_free_.store(s.largest_free_bytes, std::memory_order_relaxed);
        last_fragmentation_.store(s.fragmentation, std::memory_order_relaxed);
      } else {
        s.largest_free_bytes = last_largest_free_.load(std::memory_order_relaxed);
        s.fragmentation = last_fragmentation_.load(std::memory_order_relaxed);
      }
    }
    core_.fill_stats(s);
    stats_.fill_stats(s);
    cache_.adjust_stats(s);
    s.ooms = ooms_.load(std::memory_order_relaxed);
    s.limit_bytes = limit_.limit_bytes();
    return s;
  }

  void reset_peak_stats() {
    auto lock = locked_.lock();
    stats_.reset_peaks();
    core_.reset_peak_reserved();
    cache_.reset_peaks();
  }

  PoolSnapshot snapshot() const {
    cache_.flush();  // thread-cached blocks are free: shown as such
    auto lock = locked_.lock();
    return core_.snapshot();
  }

  // Untagged figures are the totals minus the tagged ones (the tag layer counts tagged blocks only). Read
  // without the lock, so a figure may be a moment old; never negative.
  std::vector<TagUsage> tag_usage() const {
    // Blocks in thread caches are counted below but not live: taken out of the totals and of their tags.
    TagFigures cached;
    cache_.cached_by_tag(cached);
    std::uint64_t tagged_bytes = tags_.tagged_bytes();
    std::uint64_t tagged_blocks = tags_.tagged_blocks();
    for (std::size_t t = 1; t < kMaxTags; ++t) {
      tagged_bytes -= std::min(tagged_bytes, cached.bytes[t]);
      tagged_blocks -= std::min(tagged_blocks, cached.blocks[t]);
    }
    const std::uint64_t cached_bytes = cache_.cached_bytes();
    const std::uint64_t cached_blocks = cache_.cached_blocks();
    const std::uint64_t bytes = stats_.allocated_bytes() - std::min(stats_.allocated_bytes(), cached_bytes);
    const std::uint64_t blocks = stats_.live_blocks() - std::min(stats_.live_blocks(), cached_blocks);
    return tags_.usage(bytes > tagged_bytes ? bytes - tagged_bytes : 0,
                       blocks > tagged_blocks ? blocks - tagged_blocks : 0, &cached);
  }

  Result<std::size_t> block_size(const void* ptr) const { return cache_.block_size(ptr); }

  Status check_invariants() const {
    std::uint64_t live_blocks = 0;
    {
      auto lock = locked_.lock();
      MEMCOORD_RETURN_IF_ERROR(core_.check_invariants());
      if (stats_.allocated_bytes() != core_.allocated_bytes()) {
        return Internal("the stats' allocated bytes disagree with the core's live blocks");
      }
      if (limit_.used_bytes() != core_.reserved_bytes()) {
        return Internal("the limit's count disagrees with the core's reserved bytes");
      }
      if (tags_.tagged_bytes() > stats_.allocated_bytes())
        return Internal("tagged bytes exceed allocated bytes");
      live_blocks = stats_.live_blocks();
    }
    // Outside the pool's lock: a thread cache slot's lock is never taken under it (a slot's lock may be held
    // while calling into the pool: a thread's exit returns its cache under it). Exact when no call runs.
    return cache_.check_invariants(live_blocks);
  }

  const std::string& name() const { return core_.options().name; }
  DeviceBackend& backend() const { return backend_; }

 private:
  // Puts the optional layers under the lock: tags once one is registered, the recorder while one is set.
  // REQUIRES: the lock. Layers below the lock are only ever used under it, so replacing them here is safe.
  void rewire() {
    MemoryResource* top = &stats_;
    if (tags_.tag_count() > 1) top = &tags_;
    recorder_layer_.reset();
    history_layer_.reset();
    if (recorder_ != nullptr) {
      recorder_layer_ = std::make_unique<RecorderAdaptor>(*top, *recorder_);
      top = recorder_layer_.get();
    }
    if (history_ != nullptr) {
      history_layer_ = std::make_unique<RecorderAdaptor>(*top, *history_);
      top = history_layer_.get();
    }
    locked_.set_upstream(*top);
  }

  // Attaches or detaches a sink (`set` changes recorder_ or history_). A sink sees every allocation and free,
  // so thread caches are emptied and stop caching first, and cache again only when no sink is left. The
  // flush takes the threads' slot locks, then the pool's: never under the pool's lock; sinks_mu_ keeps
  // concurrent calls from leaving caching on beside a sink.
  template <typename Set>
  void set_sink(Set set) {
    std::lock_guard sinks(sinks_mu_);
    cache_.set_caching(false);
    bool any = false;
    {
      auto lock = locked_.lock();
      set();
      rewire();
      any = recorder_ != nullptr || history_ != nullptr;
    }
    if (!any) cache_.set_caching(true);
  }

  OomEvent oom_event(std::size_t bytes) const {
    return OomEvent{name(), bytes, limit_.limit_bytes(), core_.reserved_bytes(), stats_.allocated_bytes()};
  }

  Status oom_status(std::size_t bytes, StreamId stream, const Status& cause) const {
    std::string tags;
    std::vector<TagUsage> usage = tag_usage();
    for (std::size_t i = 0; i < usage.size() && i < 5; ++i) {
      tags += fmt::format("{}{} {}", i == 0 ? "" : ", ", usage[i].tag, FormatBytes(usage[i].live_bytes));
    }
    PoolStats s = stats();
    return ResourceExhausted(fmt::format(
        "{} on {}: out of memory allocating {} ({} bytes) on stream {:#x}: limit {}, allocated {}, "
        "reserved {}, largest free block {}, device free {}; top tags: {}; cause: {}",
        owner_, backend_.kind(), FormatBytes(bytes), bytes, stream,
        s.limit_bytes == 0 ? std::string("none") : FormatBytes(s.limit_bytes), FormatBytes(s.allocated_bytes),
        FormatBytes(s.reserved_bytes), FormatBytes(s.largest_free_bytes),
        FormatBytes(backend_.device_info().free_bytes), tags.empty() ? std::string("none") : tags,
        cause.message()));
  }

  DeviceBackend& backend_;
  const std::string owner_;  // "pool 'name'", for errors
  LimitAdaptor limit_;
  CorePool core_;
  StatsAdaptor<CorePool> stats_;
  TagAdaptor<StatsAdaptor<CorePool>> tags_;
  TraceRecorder* recorder_ = nullptr;                // guarded by locked_'s lock
  std::unique_ptr<RecorderAdaptor> recorder_layer_;  // guarded by locked_'s lock
  TraceSink* history_ = nullptr;                     // guarded by locked_'s lock
  std::mutex sinks_mu_;                              // serializes set_sink
  std::unique_ptr<RecorderAdaptor> history_layer_;   // guarded by locked_'s lock
  ThreadSafeAdaptor locked_;
  // mutable: snapshot() (const) first returns thread-cached blocks to the pool; what the pool holds does not
  // change, only which layer holds it.
  mutable ThreadCacheAdaptor cache_;
  OomRetryAdaptor<ThreadCacheAdaptor> oom_;
  std::atomic<bool> hooked_{false};  // oom_ is the top of the stack (a hook is set)
  std::atomic<std::uint64_t> ooms_{0};
  // The cache figures of the last stats() that held the lock (stats_without_waiting reads them when busy).
  mutable std::atomic<std::uint64_t> last_largest_free_{0};
  mutable std::atomic<double> last_fragmentation_{0.0};
};

CachingPool::CachingPool(DeviceBackend& backend, PoolOptions options)
    : impl_(std::make_unique<Impl>(backend, std::move(options))) {}
CachingPool::~CachingPool() = default;

Result<void*> CachingPool::allocate(std::size_t bytes, StreamId stream, TagId tag) {
  return impl_->allocate(bytes, stream, tag);
}
void* CachingPool::allocate_cached(std::size_t bytes, StreamId stream, TagId tag) {
  return impl_->allocate_cached(bytes, stream, tag);
}
Status CachingPool::deallocate(void* ptr) { return impl_->deallocate(ptr); }
bool CachingPool::free_cached(void* ptr, StreamId stream) { return impl_->free_cached(ptr, stream); }
Status CachingPool::record_stream(void* ptr, StreamId stream) { return impl_->record_stream(ptr, stream); }
TrimResult CachingPool::trim(std::uint64_t target_bytes) { return impl_->trim(target_bytes); }
Status CachingPool::set_limit(std::uint64_t limit_bytes) { return impl_->set_limit(limit_bytes); }
void CachingPool::set_oom_hook(OomHook hook) { impl_->set_oom_hook(std::move(hook)); }
void CachingPool::set_recorder(TraceRecorder* recorder) { impl_->set_recorder(recorder); }
void CachingPool::set_history(TraceSink* history) { impl_->set_history(history); }
void CachingPool::set_captures_underway(bool underway) { impl_->core().set_captures_underway(underway); }
Result<TagId> CachingPool::tag(std::string_view name) { return impl_->tag(name); }
PoolStats CachingPool::stats() const { return impl_->stats(); }
PoolStats CachingPool::stats_without_waiting() const { return impl_->stats(/*wait_for_lock=*/false); }
void CachingPool::reset_peak_stats() { impl_->reset_peak_stats(); }
PoolSnapshot CachingPool::snapshot() const { return impl_->snapshot(); }
std::vector<TagUsage> CachingPool::tag_usage() const { return impl_->tag_usage(); }
Result<std::size_t> CachingPool::block_size(const void* ptr) const { return impl_->block_size(ptr); }
const std::string& CachingPool::name() const { return impl_->name(); }
DeviceBackend& CachingPool::backend() const { return impl_->backend(); }
Status CachingPool::check_invariants() const { return impl_->check_invariants(); }

}  // namespace memcoord
