// Allocator: each core's memory (torch_openreg: OpenRegDeviceAllocator). A device's allocator is
// what `torch.accelerator.memory_allocated/reserved/stats`, `empty_cache` and out-of-memory
// errors read, and code written for CUDA sizes batches and frees caches by them, so the simulator
// keeps the same books a CUDA-style caching allocator does.
//
// Each core's memory is host memory from c10::alloc_cpu (64-byte aligned, as the CPU's), handed
// out in blocks rounded up to 512 bytes. A freed block is kept for reuse (up to a per-core cache
// limit), so `memory_reserved()` >= `memory_allocated()` and `empty_cache()` gives memory back, as
// in TorchNeuron's caching allocator ("the allocator reserves large segments", memory-profiling
// guide). Statistics are CUDA's DeviceStats, which is what torch.accelerator.memory_stats()
// reads; blocks up to 1 MiB count in the small pool. Reserving past a core's capacity first drops
// the cache (a retry), then raises torch.OutOfMemoryError worded as CUDA's (TorchNeuron's wording
// is not public). The pool also serves the host redirect (host_redirect.cpp), which is how a CPU
// kernel's outputs become device memory.

#include "neuron_device.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace neuron_sim {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

constexpr size_t kRound = 512;
constexpr size_t kSmallBlock = 1 << 20;

struct Block {
  size_t size;
  size_t requested;
  int core;
};

struct CoreMemory {
  DeviceStats stats;
  std::multimap<size_t, void*> cached;  // free blocks kept for reuse, by size
  size_t cached_bytes = 0;
};

void pool_free(void* ptr);

class Pool {
 public:
  c10::DataPtr allocate(size_t requested, int core, c10::Device tag) {
    if (requested == 0) return c10::DataPtr(nullptr, nullptr, &pool_free, tag);
    const size_t size = (requested + kRound - 1) / kRound * kRound;
    std::lock_guard<std::mutex> lock(mutex_);
    CoreMemory& mem = cores_[core];
    void* ptr = take_cached(mem, size);
    size_t block = size;
    if (ptr != nullptr) {
      block = last_taken_;
    } else {
      const int64_t reserved = mem.stats.reserved_bytes[0].current;
      if (static_cast<size_t>(reserved) + size > capacity_) {
        release_cache(mem, core);
        mem.stats.num_alloc_retries += 1;
      }
      if (static_cast<size_t>(mem.stats.reserved_bytes[0].current) + size > capacity_) {
        mem.stats.num_ooms += 1;
        out_of_memory(mem, core, size);
      }
      ptr = c10::alloc_cpu(size);
      update(mem.stats.reserved_bytes, size, block, true);
      update(mem.stats.segment, size, 1, true);
      mem.stats.num_device_alloc += 1;
    }
    update(mem.stats.allocated_bytes, block, block, true);
    update(mem.stats.active_bytes, block, block, true);
    update(mem.stats.requested_bytes, block, requested, true);
    update(mem.stats.allocation, block, 1, true);
    update(mem.stats.active, block, 1, true);
    live_[ptr] = Block{block, requested, core};
    return c10::DataPtr(ptr, ptr, &pool_free, tag);
  }

  void free(void* ptr) {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) {  // not ours: raw_allocate'd by the CPU allocator's delegate
      c10::free_cpu(ptr);
      return;
    }
    const Block block = it->second;
    live_.erase(it);
    CoreMemory& mem = cores_[block.core];
    update(mem.stats.allocated_bytes, block.size, block.size, false);
    update(mem.stats.active_bytes, block.size, block.size, false);
    update(mem.stats.requested_bytes, block.size, block.requested, false);
    update(mem.stats.allocation, block.size, 1, false);
    update(mem.stats.active, block.size, 1, false);
    if (mem.cached_bytes + block.size <= cache_limit_) {
      mem.cached.emplace(block.size, ptr);
      mem.cached_bytes += block.size;
    } else {
      c10::free_cpu(ptr);
      update(mem.stats.reserved_bytes, block.size, block.size, false);
      update(mem.stats.segment, block.size, 1, false);
      mem.stats.num_device_free += 1;
    }
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [core, mem] : cores_) release_cache(mem, core);
  }

  DeviceStats stats(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    return cores_[core].stats;
  }

  // Each statistic of every pool kind, for the resets torch.neuron's reset_* functions ask for.
  template <typename F>
  static void for_each_stat(DeviceStats& s, F&& apply) {
    for (auto* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (auto& stat : *array) apply(stat);
    }
  }

  void reset_peak(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat(cores_[core].stats, [](auto& stat) { stat.reset_peak(); });
  }

  void reset_accumulated(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = cores_[core].stats;
    for_each_stat(s, [](auto& stat) { stat.reset_accumulated(); });
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
  }

  // (free, total) bytes of a core, as torch.accelerator.get_memory_info.
  std::pair<size_t, size_t> memory_info(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto reserved = static_cast<size_t>(cores_[core].stats.reserved_bytes[0].current);
    return {capacity_ > reserved ? capacity_ - reserved : 0, capacity_};
  }

  // Every block of a core: address, size, requested size, 1 if in use (0 if cached).
  std::vector<int64_t> segments(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<int64_t> out;
    for (const auto& [ptr, block] : live_) {
      if (block.core != core) continue;
      out.insert(out.end(), {reinterpret_cast<int64_t>(ptr), static_cast<int64_t>(block.size),
                             static_cast<int64_t>(block.requested), 1});
    }
    for (const auto& [size, ptr] : cores_[core].cached) {
      out.insert(out.end(), {reinterpret_cast<int64_t>(ptr), static_cast<int64_t>(size), 0, 0});
    }
    return out;
  }

  std::optional<int> core_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(const_cast<void*>(ptr));
    if (it == live_.end()) return std::nullopt;
    return it->second.core;
  }

  void configure(size_t capacity, size_t cache_limit) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = capacity;
    cache_limit_ = cache_limit;
  }

 private:
  static void update(c10::CachingAllocator::StatArray& array, size_t block, size_t amount, bool up) {
    const auto pool = block <= kSmallBlock ? StatType::SMALL_POOL : StatType::LARGE_POOL;
    for (auto type : {StatType::AGGREGATE, pool}) {
      auto& stat = array[static_cast<size_t>(type)];
      if (up) {
        stat.increase(amount);
      } else {
        stat.decrease(amount);
      }
    }
  }

  // A cached block of at least `size` bytes wasting at most a quarter of it, or nullptr.
  void* take_cached(CoreMemory& mem, size_t size) {
    auto it = mem.cached.lower_bound(size);
    if (it == mem.cached.end() || it->first > size + size / 4 + kRound) return nullptr;
    void* ptr = it->second;
    last_taken_ = it->first;
    mem.cached_bytes -= it->first;
    mem.cached.erase(it);
    return ptr;
  }

  void release_cache(CoreMemory& mem, int /*core*/) {
    for (const auto& [size, ptr] : mem.cached) {
      c10::free_cpu(ptr);
      update(mem.stats.reserved_bytes, size, size, false);
      update(mem.stats.segment, size, 1, false);
      mem.stats.num_device_free += 1;
    }
    mem.cached.clear();
    mem.cached_bytes = 0;
  }

  [[noreturn]] void out_of_memory(const CoreMemory& mem, int core, size_t size) {
    // Sizes as c10's CUDACachingAllocator format_size prints them: bytes, KiB, MiB, then GiB.
    auto gib = [](int64_t bytes) {
      std::ostringstream s;
      s.setf(std::ios::fixed);
      s.precision(2);
      if (bytes <= 1024) {
        s << bytes << " bytes";
      } else if (bytes <= 1048576) {
        s << static_cast<double>(bytes) / 1024.0 << " KiB";
      } else if (bytes <= 1073741824) {
        s << static_cast<double>(bytes) / 1048576.0 << " MiB";
      } else {
        s << static_cast<double>(bytes) / 1073741824.0 << " GiB";
      }
      return s.str();
    };
    const int64_t reserved = mem.stats.reserved_bytes[0].current;
    const int64_t allocated = mem.stats.allocated_bytes[0].current;
    const auto capacity = static_cast<int64_t>(capacity_);
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "neuron out of memory. Tried to allocate ", gib(static_cast<int64_t>(size)),
        ". NeuronCore ", core, " has a total capacity of ", gib(capacity), " of which ",
        gib(std::max<int64_t>(capacity - reserved, 0)), " is free. Of the allocated memory ", gib(allocated),
        " is allocated by PyTorch, and ", gib(reserved - allocated),
        " is reserved by PyTorch but unallocated. (simulated NeuronCore: capacity from "
        "NEURONCOMPAT_SIMULATE_CORE_MEMORY, default 24 GiB per logical core)");
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<int, CoreMemory> cores_;
  size_t capacity_ = size_t{24} << 30;
  size_t cache_limit_ = size_t{256} << 20;
  size_t last_taken_ = 0;
};

Pool g_pool;

void pool_free(void* ptr) { g_pool.free(ptr); }

struct NeuronAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex index = current_index();
    return g_pool.allocate(n, index, c10::Device(kNeuron, index));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pool_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override { g_pool.empty_cache(); }
  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}
  // A core that does not exist has no statistics: it raises, as CUDA's "invalid device ordinal".
  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_index(device);
    return g_pool.stats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_index(device);
    g_pool.reset_accumulated(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_index(device);
    g_pool.reset_peak(device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_index(device);
    return g_pool.memory_info(device);
  }
};

NeuronAllocator g_allocator;

}  // namespace

c10::Allocator* device_allocator() { return &g_allocator; }

c10::DataPtr pool_allocate(size_t requested, int core, c10::Device tag) { return g_pool.allocate(requested, core, tag); }

std::optional<int> pool_core_of(const void* ptr) { return g_pool.core_of(ptr); }

std::vector<int64_t> pool_segments(int core) { return g_pool.segments(core); }

void install_allocator() { c10::SetAllocator(kNeuron, &g_allocator); }

}  // namespace neuron_sim

extern "C" void neuroncompat_configure_memory(int64_t capacity, int64_t cache_limit) {
  neuron_sim::g_pool.configure(static_cast<size_t>(capacity), static_cast<size_t>(cache_limit));
}
