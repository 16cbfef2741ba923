// The simulated NeuronCore: a native PrivateUse1 backend whose memory is host memory and whose
// kernels are the CPU's.
//
// TorchNeuron is a C++ PrivateUse1 backend with ATen kernels; so is PyTorch's reference
// out-of-tree backend, torch_openreg. This file is the same shape, with one difference that
// makes it a simulator: every op without a kernel of its own here runs the CPU kernel on the
// device tensor's own memory (the boxed fallback below), so numerics are the CPU's bit for bit
// and nothing is copied. The parts, in order:
//
//   device guard, streams and events   which core is current (per thread, as CUDA's)
//   allocator                          per-core host memory, a caching pool with CUDA-style
//                                      statistics, the 24 GiB-per-core limit, out-of-memory errors
//   host redirect                      while a CPU kernel runs for a core, CPU allocations come
//                                      from that core's pool, so its outputs are device memory
//   generator                          TorchNeuron's (seed, offset) state; random ops draw from it
//   hooks                              availability, core count, generators, pinned host memory
//   kernels                            empty, copies, views, set_/resize_, SDPA's backend choice,
//                                      autocast, the boxed fallback
//   observer                           tells `neuroncompat simulate` about the ops it watches
//   neuroncompat_sim ops, extern "C"   what the Python side (neuroncompat/simulator) calls
//
// What differs from the CPU on purpose: mixing devices in one op raises by CUDA's rules (see
// DeviceCheck); reading memory a storage no longer holds raises; random ops draw from the core's
// generator; autocast follows CUDA's policy; quantized operator variants are refused
// (TorchNeuron's supported-operators page, class N). The Python
// side (neuroncompat/simulator/native_device.py) builds this file once per torch build.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/DeviceGuard.h>
#include <ATen/EmptyTensor.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::StatType;

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
constexpr int kMaxCores = 128;  // c10::DeviceIndex is an int8
constexpr int64_t kStateBytes = 16;  // uint64 seed, then int64 offset (TorchNeuron's layout)

std::atomic<bool> g_available{false};
std::atomic<int> g_cores{1};
std::atomic<int> g_default_device{0};
thread_local int t_current = -1;  // -1: this thread never chose a core; it is on the default

c10::DeviceIndex current_index() {
  return static_cast<c10::DeviceIndex>(t_current >= 0 ? t_current : g_default_device.load());
}

void check_index(c10::DeviceIndex index) {
  const int cores = g_cores.load();
  TORCH_CHECK(
      index >= 0 && index < cores,
      "neuron:", static_cast<int>(index), " is not a valid device: ", cores,
      " simulated NeuronCore(s) are visible (valid indices 0..", cores - 1, ")");
}

c10::Device resolved(c10::Device device) {
  return device.has_index() ? device : c10::Device(kNeuron, current_index());
}

// A stream or event asked for by device: on a core that exists.
c10::Device checked(c10::Device device) {
  c10::Device d = resolved(device);
  check_index(d.index());
  return d;
}

// ---------------------------------------------------------------------------------------------
// Device guard, streams and events. One in-order stream per core: every op has finished on the
// CPU when it returns, so events and stream waits have nothing to order.

struct NeuronGuard final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device previous = getDevice();
    if (device.index() != previous.index()) setDevice(device);
    return previous;
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_index()); }
  void setDevice(c10::Device device) const override {
    if (!device.has_index()) return;
    check_index(device.index());
    t_current = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.has_index()) t_current = device.index();
  }
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, checked(device));
  }
  c10::Stream getDefaultStream(c10::Device device) const override { return getStream(device); }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    return getStream(device);
  }
  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override { return getStream(device); }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(g_cores.load()); }
  void record(void** /*event*/, const c10::Stream& /*stream*/, const c10::DeviceIndex /*device_index*/,
              const c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* /*event*/, const c10::DeviceIndex /*device_index*/) const noexcept override {}
  void synchronizeEvent(void* /*event*/) const override {}
  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const c10::Stream& /*stream*/) const override {}
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (device_index >= 0) check_index(device_index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
};

// ---------------------------------------------------------------------------------------------
// Allocator. Each core's memory is host memory from c10::alloc_cpu (64-byte aligned, as the
// CPU's), handed out in blocks rounded up to 512 bytes. A freed block is kept for reuse (up to a
// per-core cache limit), so `memory_reserved()` >= `memory_allocated()` and `empty_cache()`
// gives memory back, as in TorchNeuron's caching allocator ("the allocator reserves large
// segments", memory-profiling guide). Statistics are CUDA's DeviceStats, which is what
// torch.accelerator.memory_stats() reads; blocks up to 1 MiB count in the small pool.
// Reserving past a core's capacity first drops the cache (a retry), then raises
// torch.OutOfMemoryError worded as CUDA's (TorchNeuron's wording is not public).

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

  void reset_peak(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = cores_[core].stats;
    for (auto* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (auto& stat : *array) stat.reset_peak();
    }
  }

  void reset_accumulated(int core) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& s = cores_[core].stats;
    for (auto* array : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
                        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
      for (auto& stat : *array) stat.reset_accumulated();
    }
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

// ---------------------------------------------------------------------------------------------
// Host redirect. While the fallback runs a CPU kernel for core N (t_kernel_core = N), the CPU
// allocator hands out core N's memory (tagged CPU, since the kernel computes on CPU tensors);
// everywhere else it is the CPU allocator it replaced. So an op's outputs, and its temporaries,
// are device memory, counted in the core's statistics, and become device tensors without a copy.

thread_local int t_kernel_core = -1;

struct KernelCoreGuard {
  explicit KernelCoreGuard(int core) : previous(t_kernel_core) { t_kernel_core = core; }
  ~KernelCoreGuard() { t_kernel_core = previous; }
  int previous;
};

struct HostRedirectAllocator final : public c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    if (t_kernel_core < 0) return base->allocate(n);
    return g_pool.allocate(n, t_kernel_core, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return base->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostRedirectAllocator g_host_redirect;

// Pinned host memory: plain host memory whose blocks are remembered, so is_pinned() is true for
// tensors (and views into them) that pin_memory() made. On the simulator pinning changes no
// value; whether TorchNeuron's allocator page-locks is not documented.
class PinnedAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* ptr = n == 0 ? nullptr : c10::alloc_cpu(n);
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(mutex());
      blocks()[ptr] = n;
    }
    return c10::DataPtr(ptr, ptr, &release, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  static bool contains(const void* data) {
    std::lock_guard<std::mutex> lock(mutex());
    auto& all = blocks();
    auto it = all.upper_bound(const_cast<void*>(data));
    if (it == all.begin()) return false;
    --it;
    return static_cast<const char*>(data) < static_cast<const char*>(it->first) + it->second;
  }

 private:
  static void release(void* ptr) {
    if (ptr == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(mutex());
      blocks().erase(ptr);
    }
    c10::free_cpu(ptr);
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<void*, size_t>& blocks() {
    static std::map<void*, size_t> b;
    return b;
  }
};

PinnedAllocator g_pinned;

// ---------------------------------------------------------------------------------------------
// Generator. A core's random state as TorchNeuron keeps it (AWS Neuron docs, "Random number
// generation"): a seed and an offset into its stream, 16 bytes, and a nondeterministic seed until
// seeded. How TorchNeuron's kernels turn (seed, offset) into values is not public; the simulator
// follows CUDA's contract: a random op draws from a CPU generator seeded by mixing (seed, offset)
// (splitmix64), then advances the offset by the values drawn, rounded up to 4 (a Philox call's
// width; DTensor aligns shard offsets to 4). The same (seed, offset) gives the same values.

uint64_t mix(uint64_t seed, uint64_t offset) {
  uint64_t z = seed ^ (offset * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct NeuronGenerator final : public c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {
    seed();
  }
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    offset_ = 0;
  }
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    uint64_t fresh = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(fresh);
    return fresh;
  }
  void set_state(const c10::TensorImpl& new_state) override {
    TORCH_CHECK(
        new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == kStateBytes &&
            new_state.device().is_cpu() && new_state.is_contiguous(),
        "a neuron RNG state is ", kStateBytes,
        " bytes (a contiguous CPU torch.uint8 tensor: seed then offset, as CUDA's), got ", new_state.numel(),
        " element(s) of ", new_state.dtype().name(), " on ", new_state.device());
    const auto* bytes = static_cast<const uint8_t*>(new_state.data());
    std::memcpy(&seed_, bytes, sizeof(seed_));
    std::memcpy(&offset_, bytes + sizeof(seed_), sizeof(offset_));
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    at::TensorBase state = at::detail::empty_cpu({kStateBytes}, c10::ScalarType::Byte, std::nullopt,
                                                 std::nullopt, std::nullopt, std::nullopt);
    auto* bytes = static_cast<uint8_t*>(state.data_ptr());
    std::memcpy(bytes, &seed_, sizeof(seed_));
    std::memcpy(bytes + sizeof(seed_), &offset_, sizeof(offset_));
    return state.getIntrusivePtr();
  }
  static c10::DeviceType device_type() { return kNeuron; }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* copy = new NeuronGenerator(device_.index());
    copy->seed_ = seed_;
    copy->offset_ = offset_;
    return copy;
  }
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::array<at::Generator, kMaxCores> generators;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  at::Generator& gen = generators.at(index);
  if (!gen.defined()) gen = at::make_generator<NeuronGenerator>(index);
  return gen;
}

// ---------------------------------------------------------------------------------------------
// Hooks.

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_available.load(); }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return g_available.load(); }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(g_cores.load()); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_index(device);
    t_current = device;
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_index(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex previous = current_index();
    if (device >= 0) setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    c10::DeviceIndex index = device_index >= 0 ? device_index : current_index();
    check_index(index);
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override {
    c10::DeviceIndex index = device_index >= 0 ? device_index : current_index();
    check_index(index);
    return at::make_generator<NeuronGenerator>(index);
  }
  bool isPinnedPtr(const void* data) const override { return PinnedAllocator::contains(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned; }
  at::Device getDeviceFromPtr(void* data) const override {
    auto core = g_pool.core_of(data);
    return core ? c10::Device(kNeuron, static_cast<c10::DeviceIndex>(*core)) : c10::Device(c10::kCPU);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    const c10::DeviceGuard guard(storage.device());  // the storage's core, not the current one
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

NeuronGuard g_guard;
NeuronHooks g_hooks;

// ---------------------------------------------------------------------------------------------
// Host aliases. A CPU kernel runs on a CPU tensor over the device tensor's own bytes: its
// storage's data pointer is the device storage's, and it keeps the device storage alive. A CPU
// result becomes a device tensor the other way round: a device storage over the CPU storage's
// bytes, keeping that alive. Each wrapper knows its partner through its DataPtr's context, so a
// round trip returns the original storage (view outputs share their input's storage, and storage
// identity, as on any device), and nothing is copied either way.

void release_device_storage(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }
void release_host_storage(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

c10::Storage partner(const c10::Storage& storage, c10::DeleterFnPtr deleter) {
  const c10::DataPtr& dp = storage.unsafeGetStorageImpl()->data_ptr();
  if (dp.get_deleter() != deleter) return c10::Storage();
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(static_cast<c10::StorageImpl*>(dp.get_context())));
}

c10::Storage wrap_storage(const c10::Storage& inner, c10::DeleterFnPtr deleter, c10::Device tag, c10::Allocator* allocator) {
  c10::StorageImpl* impl = inner.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr dp(impl->data_ptr().get(), impl, deleter, tag);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
                                                            std::move(dp), allocator, /*resizable=*/true));
}

// Host storage for a device storage.
c10::Storage host_storage(const c10::Storage& device) {
  c10::Storage held = partner(device, &release_host_storage);
  if (held) return held;
  return wrap_storage(device, &release_device_storage, c10::Device(c10::kCPU), &g_host_redirect);
}

// Device storage (on core `index`) for a host storage.
c10::Storage device_storage(const c10::Storage& host, c10::DeviceIndex index) {
  c10::Storage held = partner(host, &release_device_storage);
  if (held) return held;
  return wrap_storage(host, &release_host_storage, c10::Device(kNeuron, index), &g_allocator);
}

at::Tensor tensor_on(c10::Storage storage, const at::Tensor& like, c10::DispatchKeySet keys, bool view) {
  c10::intrusive_ptr<c10::TensorImpl> impl =
      view ? c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, std::move(storage), keys, like.dtype())
           : c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

// A device tensor whose storage no longer holds it (freed with `untyped_storage().resize_(0)`, as
// FSDP2 frees parameters between uses, or shrunk) must not be read: on a device that is an
// illegal memory access, and here a host alias over it would let a CPU kernel read freed memory.
// The sizes are torch's own (at::detail::computeStorageNbytes, as checkInBoundsForStorage).
void check_in_storage(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->has_symbolic_sizes_strides()) return;  // a fake tensor while Dynamo traces: no memory
  const size_t have = impl->storage().nbytes();
  const size_t needed = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize(),
                                                         static_cast<size_t>(t.storage_offset()));
  if (needed <= have) return;
  TORCH_CHECK(false, "illegal memory access on ", t.device(), ": a tensor of size ", t.sizes(), " (strides ",
              t.strides(), ", storage offset ", t.storage_offset(), ", ", t.dtype().name(), ") needs ", needed,
              " bytes of storage, but its storage holds ", have,
              " bytes (freed or shrunk, e.g. by untyped_storage().resize_(0)); a device reports this as an "
              "illegal memory access");
}

// The storages one op call has seen, so that two arguments over the same device storage share
// one host storage and an output over an input's host storage is a view of that input.
struct CallStorages {
  struct Entry {
    c10::StorageImpl* host;
    c10::Storage device;
    c10::DispatchKeySet keys;
  };
  c10::SmallVector<Entry, 8> entries;
  c10::DeviceIndex index = -1;

  at::Tensor host(const at::Tensor& t) {
    if (!t.defined() || !t.is_privateuseone()) return t;
    check_in_storage(t);
    c10::StorageImpl* dev = t.storage().unsafeGetStorageImpl();
    for (const auto& e : entries) {
      if (e.device.unsafeGetStorageImpl() == dev) {
        return tensor_on(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(e.host)), t,
                         c10::DispatchKeySet(c10::DispatchKey::CPU), false);
      }
    }
    c10::Storage hs = host_storage(t.storage());
    entries.push_back(Entry{hs.unsafeGetStorageImpl(), t.storage(), t.key_set()});
    return tensor_on(std::move(hs), t, c10::DispatchKeySet(c10::DispatchKey::CPU), false);
  }

  at::Tensor device(const at::Tensor& h) {
    if (!h.defined() || !h.device().is_cpu()) return h;
    TORCH_CHECK_NOT_IMPLEMENTED(
        !h.is_quantized(), "Could not run a quantized operator variant on the 'neuron' backend: quantized "
        "tensors are not supported on Neuron (TorchNeuron supported operators: class N)");
    TORCH_CHECK(h.layout() == c10::kStrided, "the simulated neuron device holds strided tensors only, got ",
                h.layout());
    c10::StorageImpl* hs = h.storage().unsafeGetStorageImpl();
    for (const auto& e : entries) {
      if (e.host == hs) return tensor_on(e.device, h, e.keys, true);
    }
    c10::Storage ds = device_storage(h.storage(), index);
    const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
    at::Tensor out = tensor_on(ds, h, keys, false);
    entries.push_back(Entry{hs, std::move(ds), out.key_set()});
    return out;
  }

  // After an op wrote `host` (an argument's host alias): carry a resize or a new storage back to
  // the device tensor `target`.
  void write_back(const at::Tensor& target, const at::Tensor& host) {
    c10::TensorImpl* impl = target.unsafeGetTensorImpl();
    c10::StorageImpl* dev = impl->storage().unsafeGetStorageImpl();
    c10::StorageImpl* now = host.storage().unsafeGetStorageImpl();
    const Entry* mine = nullptr;
    for (const auto& e : entries) {
      if (e.device.unsafeGetStorageImpl() == dev) mine = &e;
    }
    if (mine != nullptr && mine->host == now) {
      if (now->data_ptr().get() != dev->data_ptr().get() || now->nbytes() != dev->nbytes()) {
        // the kernel resized the alias: the device storage takes over the new bytes
        c10::Storage moved = wrap_storage(host.storage(), &release_host_storage, c10::Device(kNeuron, index), &g_allocator);
        dev->set_data_ptr_noswap(std::move(moved.unsafeGetStorageImpl()->mutable_data_ptr()));
        dev->set_nbytes(now->nbytes());
      }
    } else {
      impl->set_storage_keep_dtype(device(host).storage());
    }
    if (target.sizes() != host.sizes() || target.strides() != host.strides() ||
        target.storage_offset() != host.storage_offset()) {
      impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Observer: `neuroncompat simulate` watches some ops (data-dependent shapes, CPU fallbacks) and
// the dtypes TorchNeuron treats specially (complex, float64). Events: 1 a watched op ran, 2 it
// indexed with a boolean/uint8 mask, 4 it made a complex tensor on the device, 8 a float64 one.

using ObserverFn = void (*)(const char* op, int events);
std::atomic<ObserverFn> g_observer{nullptr};
std::atomic<uint64_t> g_watch_generation{1};
std::mutex g_watch_mutex;
std::unordered_set<std::string> g_watched;  // "aten::nonzero" or "aten::index.Tensor"

int dtype_events(const at::Tensor& t) {
  if (!t.defined()) return 0;
  if (c10::isComplexType(t.scalar_type())) return 4;
  if (t.scalar_type() == c10::kDouble) return 8;
  return 0;
}

void notify(const std::string& op, int events) {
  ObserverFn fn = g_observer.load();
  if (fn != nullptr && events != 0) fn(op.c_str(), events);
}

// ---------------------------------------------------------------------------------------------
// What the fallback needs to know about an op, worked out once per schema (per thread).

// Which device check an op gets, as CUDA's (torch's source decides, not a list kept here):
// torchgen generates a check that every positional and out= tensor is on one device (no CPU
// tensor, not even a 0-dim one) for each op unless native_functions.yaml says
// `device_check: NoCheck`; such an op's kernel checks for itself. Among those, TensorIterator's
// accepts one 0-dim CPU input as a scalar; the index ops' accept indices on the CPU; copies
// accept any pair of devices. The NoCheck names come from the yaml torch ships (torchgen), read
// by the Python side (neuroncompat/simulator/device_checks.py) and set before the first op.
enum class DeviceCheck { kExactSame, kTensorIterator, kIndexing, kCopy };

// "a,b,c" -> {a, b, c}
std::unordered_set<std::string> split_names(const char* names) {
  std::unordered_set<std::string> out;
  const std::string all = names != nullptr ? names : "";
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    if (end > start) out.insert(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::mutex g_unchecked_mutex;
std::unordered_set<std::string> g_unchecked;  // "add.Tensor", "copy_": the NoCheck ops

bool quantized_op(const std::string& name) {
  return name.rfind("quantized::", 0) == 0 || name.rfind("aten::quantize_per", 0) == 0 ||
         name.rfind("aten::_make_per_tensor_quantized", 0) == 0 ||
         name.rfind("aten::_make_per_channel_quantized", 0) == 0 || name.rfind("aten::q_", 0) == 0 ||
         name.rfind("aten::int_repr", 0) == 0;
}

struct OpInfo {
  std::string name;        // aten::add.Tensor
  DeviceCheck check = DeviceCheck::kExactSame;
  std::string method;      // CUDA's wording of the kernel in its error: wrapper_PrivateUse1_add_Tensor
  std::vector<int> checked_args;  // out= then positional arguments, the order torchgen checks them
  int indices_arg = -1;           // an index op's `Tensor?[] indices`
  int values_arg = -1;            // index_put's `Tensor values`
  bool random = false;
  int generator_arg = -1;
  bool refused = false;
  bool watched = false;
  bool mask_indexing = false;
  std::vector<int> write_args;     // arguments the op writes (in-place self, out=)
  std::vector<int> write_returns;  // for each return, the argument it is (or -1)
  std::vector<std::string> arg_names;
  uint64_t generation = 0;
};

OpInfo make_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  OpInfo info;
  const std::string& base = schema.name();
  info.name = schema.overload_name().empty() ? base : base + "." + schema.overload_name();
  info.random = op.hasTag(at::Tag::nondeterministic_seeded);
  info.refused = quantized_op(base);
  const auto& args = schema.arguments();
  const bool aten = base.rfind("aten::", 0) == 0;
  const std::string short_name = aten ? info.name.substr(6) : info.name;
  bool unchecked = !aten;  // another library's op: its kernel's own rules, taken as TensorIterator's
  if (aten) {
    std::lock_guard<std::mutex> lock(g_unchecked_mutex);
    unchecked = g_unchecked.count(short_name) > 0;
  }
  const std::string bare = base.substr(aten ? 6 : 0);
  info.method = "wrapper_PrivateUse1_" + (schema.overload_name().empty() ? "_" + bare : bare + "_" + schema.overload_name());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_out()) info.checked_args.push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].kwarg_only()) info.checked_args.push_back(static_cast<int>(i));
    const c10::TypePtr& type = args[i].real_type();
    if (args[i].name() == "indices" && type->kind() == c10::TypeKind::ListType &&
        type->containedType(0)->kind() == c10::TypeKind::OptionalType) {
      info.indices_arg = static_cast<int>(i);
    }
    if (args[i].name() == "values" && type->kind() == c10::TypeKind::TensorType) info.values_arg = static_cast<int>(i);
  }
  if (!unchecked) {
    info.check = DeviceCheck::kExactSame;
  } else if (info.indices_arg >= 0) {
    info.check = DeviceCheck::kIndexing;
  } else if (short_name.find("copy") != std::string::npos) {
    info.check = DeviceCheck::kCopy;
  } else {
    info.check = DeviceCheck::kTensorIterator;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    info.arg_names.push_back(args[i].name());
    if (args[i].name() == "generator") info.generator_arg = static_cast<int>(i);
    const c10::AliasInfo* alias = args[i].alias_info();
    if (alias != nullptr && alias->isWrite()) info.write_args.push_back(static_cast<int>(i));
  }
  for (const auto& ret : schema.returns()) {
    int target = -1;
    const c10::AliasInfo* alias = ret.alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < args.size(); ++i) {
        const c10::AliasInfo* a = args[i].alias_info();
        if (a != nullptr && a->beforeSets() == alias->beforeSets()) {
          target = static_cast<int>(i);
          break;
        }
      }
    }
    info.write_returns.push_back(target);
  }
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    info.watched = g_watched.count(base) > 0 || g_watched.count(info.name) > 0;
  }
  info.mask_indexing = base == "aten::index" || base == "aten::_unsafe_index" || base == "aten::index_put_" ||
                       base == "aten::index_put" || base == "aten::_index_put_impl_" ||
                       base == "aten::_unsafe_index_put";
  info.generation = g_watch_generation.load();
  return info;
}

const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> cache;
  const c10::FunctionSchema* key = &op.schema();
  auto it = cache.find(key);
  if (it == cache.end() || it->second.generation != g_watch_generation.load()) {
    it = cache.insert_or_assign(key, make_info(op)).first;
  }
  return it->second;
}

[[noreturn]] void mixed_devices(const std::string& op, int first, const std::string& other) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:", first,
              " and ", other, "! (when checking argument for ", op, ")");
}

// Each tensor among the arguments, with its argument's index (tensors in lists too).
template <typename Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (t.defined()) fn(t);
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toList()) {
      if (e.isTensor() && e.toTensor().defined()) fn(e.toTensor());
    }
  }
}

// The device check of an op given a CPU tensor beside a tensor on core `core` (see DeviceCheck).
void check_devices(const OpInfo& info, const c10::SmallVector<c10::IValue, 8>& args, int core) {
  const auto& schema_args = info.checked_args;
  switch (info.check) {
    case DeviceCheck::kCopy:
      return;
    case DeviceCheck::kExactSame: {
      // torchgen's generated check (RegisterCUDA.cpp), with its message.
      std::optional<c10::Device> common;
      for (int i : schema_args) {
        const c10::IValue& v = args[i];
        const std::string& arg = info.arg_names[i];
        for_each_tensor(v, [&](const at::Tensor& t) {
          c10::impl::check_and_update_common_device(common, t, info.method.c_str(), arg.c_str());
        });
      }
      return;
    }
    case DeviceCheck::kIndexing: {
      // TensorAdvancedIndexing.cpp: index's meta function requires indices on the CPU or on
      // self's device; index_put moves indices to self's device and a 0-dim value as well, and
      // its TensorIterator checks every other tensor.
      const c10::Device self = args[0].toTensor().device();
      for (size_t i = 0; i < args.size(); ++i) {
        if (static_cast<int>(i) == 0) continue;
        for_each_tensor(args[i], [&](const at::Tensor& t) {
          if (t.device() == self) return;
          if (static_cast<int>(i) == info.indices_arg) {
            TORCH_CHECK(info.values_arg >= 0 || t.is_cpu(), "indices should be either on ", c10::kCPU,
                        " or on the same device as the indexed tensor (", self, ")");
            return;
          }
          if (static_cast<int>(i) == info.values_arg && t.dim() == 0 && t.numel() == 1) return;
          TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", self,
                      " and ", t.device(), "! (when checking argument for ", info.name, ")");
        });
      }
      return;
    }
    case DeviceCheck::kTensorIterator: {
      // TensorIteratorBase::compute_types: one 0-dim CPU input is taken as a scalar.
      int scalars = 0;
      for (size_t i = 0; i < args.size(); ++i) {
        const bool written = std::find(info.write_args.begin(), info.write_args.end(), static_cast<int>(i)) !=
                             info.write_args.end();
        for_each_tensor(args[i], [&](const at::Tensor& t) {
          if (!t.is_cpu()) return;
          if (!written && t.dim() == 0) {
            TORCH_CHECK(++scalars <= 1, "Trying to pass too many CPU scalars to non-CPU kernel! (", info.name, ")");
            return;
          }
          mixed_devices(info.name, core, "cpu");
        });
      }
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The boxed fallback: every op without a kernel of its own here. It replaces each device tensor
// among the arguments (alone, in lists, in lists of optionals) by its host alias and each
// `device="neuron"` by the CPU, runs the op's CPU kernel with the core's pool as the CPU
// allocator, then turns the results back into device tensors (in-place and out= results are the
// caller's own tensors).

struct ArgScan {
  CallStorages* storages;
  const OpInfo* info;
  int index = -1;
  bool cpu_operand = false;  // a CPU tensor among the arguments: the op's device check decides
  bool mask = false;

  void see_device(int core) {
    if (index < 0) {
      index = core;
    } else if (core != index) {
      mixed_devices(info->name, index, "neuron:" + std::to_string(core));
    }
  }

  at::Tensor host(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.is_privateuseone()) {
      see_device(t.device().index());
      return storages->host(t);
    }
    if (t.device().is_cpu()) cpu_operand = true;
    return t;
  }

  c10::IValue map(const c10::IValue& v, bool indices) {
    if (v.isTensor()) return host(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      auto in = v.toTensorList();
      out.reserve(in.size());
      for (const at::Tensor& t : in) out.push_back(host(t));
      return out;
    }
    if (v.isList()) {
      auto in = v.toList();
      c10::impl::GenericList out(in.elementType());
      out.reserve(in.size());
      for (const c10::IValue& e : in) {
        if (e.isTensor()) {
          const at::Tensor& t = e.toTensor();
          if (indices && t.defined() && (t.scalar_type() == c10::kBool || t.scalar_type() == c10::kByte)) mask = true;
          out.push_back(host(t));
        } else {
          out.push_back(e);
        }
      }
      return out;
    }
    if (v.isDevice() && v.toDevice().type() == kNeuron) {
      const c10::Device d = v.toDevice();
      see_device(d.has_index() ? d.index() : current_index());
      return c10::Device(c10::kCPU);
    }
    return v;
  }
};

c10::IValue to_device(CallStorages& storages, const c10::IValue& v) {
  if (v.isTensor()) return storages.device(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    auto in = v.toTensorList();
    out.reserve(in.size());
    for (const at::Tensor& t : in) out.push_back(storages.device(t));
    return out;
  }
  return v;
}

int64_t numel_of(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? v.toTensor().numel() : 0;
  if (v.isTensorList()) {
    int64_t n = 0;
    for (const at::Tensor& t : v.toTensorList()) n += t.numel();
    return n;
  }
  return 0;
}

int events_of(const c10::IValue& v) {
  if (v.isTensor()) return dtype_events(v.toTensor());
  if (v.isTensorList()) {
    int e = 0;
    for (const at::Tensor& t : v.toTensorList()) e |= dtype_events(t);
    return e;
  }
  return 0;
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, int core) {
  KernelCoreGuard kernel(core);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// A random op: draw from the core's generator (or the neuron generator passed), then advance it.
void run_seeded(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info, size_t first_arg,
                int core) {
  at::Generator gen;
  c10::IValue* gen_arg = nullptr;
  if (info.generator_arg >= 0) {
    gen_arg = &(*stack)[first_arg + info.generator_arg];
    if (gen_arg->isGenerator()) gen = gen_arg->toGenerator();
  }
  if (gen.defined()) {
    TORCH_CHECK(gen.device().type() == kNeuron, "Expected a 'neuron' device type for generator but found '",
                c10::DeviceTypeName(gen.device().type(), true), "'");
  } else {
    gen = default_generator(static_cast<c10::DeviceIndex>(core));
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  auto* neuron = gen.get<NeuronGenerator>();
  const uint64_t offset = neuron->get_offset();
  const uint64_t seed = mix(neuron->current_seed(), offset);
  if (gen_arg != nullptr) {
    *gen_arg = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(seed));
    run_on_cpu(op, stack, core);
  } else {
    // An op with no generator argument (native_dropout) draws from the CPU default generator.
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    c10::intrusive_ptr<c10::TensorImpl> saved;
    {
      std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
      saved = cpu.get_state().getIntrusivePtr();
      cpu.set_current_seed(seed);
    }
    try {
      run_on_cpu(op, stack, core);
    } catch (...) {
      std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
      cpu.set_state(at::Tensor(saved));
      throw;
    }
    std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
    cpu.set_state(at::Tensor(saved));
  }
  int64_t drawn = 0;
  const size_t returns = op.schema().returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) drawn += numel_of((*stack)[i]);
  neuron->set_offset(offset + static_cast<uint64_t>((drawn + 3) / 4 * 4));
}

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  TORCH_CHECK_NOT_IMPLEMENTED(
      !info.refused, "Could not run '", info.name,
      "' with arguments from the 'neuron' backend: quantized operator variants are not supported on Neuron "
      "(TorchNeuron supported operators: class N)");
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  c10::SmallVector<c10::IValue, 8> originals;
  originals.reserve(nargs);
  CallStorages storages;
  ArgScan scan{&storages, &info};
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& slot = (*stack)[first + i];
    originals.push_back(slot);
    slot = scan.map(slot, info.mask_indexing && i == 1);
  }
  const int core = scan.index >= 0 ? scan.index : current_index();
  if (scan.cpu_operand && scan.index >= 0) check_devices(info, originals, scan.index);
  storages.index = static_cast<c10::DeviceIndex>(core);
  if (info.watched) notify(info.name, 1 | (scan.mask ? 2 : 0));

  c10::SmallVector<c10::IValue, 4> written;  // the host aliases of written arguments
  for (int a : info.write_args) written.push_back((*stack)[first + a]);
  if (info.random) {
    run_seeded(op, stack, info, first, core);
  } else {
    run_on_cpu(op, stack, core);
  }

  for (size_t w = 0; w < info.write_args.size(); ++w) {
    const c10::IValue& target = originals[info.write_args[w]];
    const c10::IValue& host = written[w];
    if (target.isTensor() && host.isTensor() && target.toTensor().is_privateuseone()) {
      storages.write_back(target.toTensor(), host.toTensor());
    } else if (target.isTensorList() && host.isTensorList()) {
      auto targets = target.toTensorList();
      auto hosts = host.toTensorList();
      for (size_t i = 0; i < targets.size(); ++i) {
        const at::Tensor device_tensor = targets[i];
        if (device_tensor.is_privateuseone()) storages.write_back(device_tensor, hosts[i]);
      }
    }
  }
  const size_t returns = op.schema().returns().size();
  int events = 0;
  for (size_t r = 0; r < returns; ++r) {
    c10::IValue& slot = (*stack)[stack->size() - returns + r];
    const int target = info.write_returns[r];
    if (target >= 0) {
      slot = originals[target];
    } else {
      slot = to_device(storages, slot);
    }
    events |= events_of(slot);
  }
  if (events != 0 && g_observer.load() != nullptr) notify(info.name, events);
}

// ---------------------------------------------------------------------------------------------
// Kernels of their own: allocation, copies, views and storage changes act on the device tensor
// itself (views share its storage; no host alias is needed).

void check_strided(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "the simulated neuron device holds strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
}

void note_dtype(const char* op, c10::ScalarType dtype) {
  if (g_observer.load() == nullptr) return;
  const int events = c10::isComplexType(dtype) ? 4 : dtype == c10::kDouble ? 8 : 0;
  if (events != 0) notify(op, events);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_strided(layout, pin_memory);
  const c10::DeviceGuard guard(resolved(c10::device_or_default(device)));
  const auto type = c10::dtype_or_default(dtype);
  note_dtype("aten::empty.memory_format", type);
  return at::detail::empty_generic(size, &g_allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type,
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_strided(layout, pin_memory);
  const c10::DeviceGuard guard(resolved(c10::device_or_default(device)));
  const auto type = c10::dtype_or_default(dtype);
  note_dtype("aten::empty_strided", type);
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  CallStorages storages;
  storages.index = dst.is_privateuseone() ? dst.device().index() : self.device().index();
  at::Tensor src_host = storages.host(self);
  at::Tensor dst_host = storages.host(dst);
  {
    KernelCoreGuard kernel(storages.index);
    at::native::copy_(dst_host, src_host, non_blocking);
  }
  if (dst.is_privateuseone() && !self.is_privateuseone()) note_dtype("aten::_copy_from", dst.scalar_type());
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  {
    const at::OptionalDeviceGuard guard(at::device_of(dst));  // the new bytes are dst's core's
    at::native::resize_(dst, self.sizes(), std::nullopt);
  }
  return copy_from(self, dst, false);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// The ops below may allocate (a storage that grows, a new empty one). The allocator serves the
// current core, so each runs under the guard of the tensor it allocates for, as CUDA's generated
// kernels do (an OptionalDeviceGuard on device_of(self)): a tensor on neuron:1 resized while
// neuron:0 is current keeps its memory on core 1.
const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::resize_(self, size, format);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_allocator, /*resizable=*/true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(storage));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

// SDPA asks each backend which fused kernel to use; the CPU's answer, so scaled_dot_product_attention
// runs the same CPU kernel (flash attention for CPU, or math) as on the CPU.
int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& mask, double dropout, bool causal, std::optional<double> scale,
                   bool gqa) {
  // Only metadata decides; under FakeTensorMode (Dynamo tracing) the host aliases must reach
  // the CPU kernel directly rather than the mode.
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  // The aliases carry each tensor's requires_grad: the CPU's choice depends on it (a mask that requires
  // grad rules out flash attention, whose backward has no gradient for the mask: doge, inkling).
  CallStorages storages;
  auto host = [&storages](const at::Tensor& t) {
    at::Tensor alias = storages.host(t);
    if (t.requires_grad()) alias.requires_grad_(true);
    return alias;
  };
  std::optional<at::Tensor> host_mask;
  if (mask.has_value()) host_mask = host(*mask);
  return at::_fused_sdp_choice(host(query), host(key), host(value), host_mask, dropout, causal, scale, gqa);
}

// The fused RNN cells. ATen's LSTM and GRU take the fused-cell path for every accelerator
// (RNN.cpp: `input.is_cuda() || input.is_xpu() || input.is_privateuseone()`), and only CUDA has
// kernels for it: without these, nn.LSTM and nn.GRU fail on the device. The math is CUDA's
// (aten/src/ATen/native/cuda/RNN.cu): gates summed with the biases, then the activations, in
// float for reduced-precision inputs as CUDA's accscalar_t does; the workspace holds the
// activated gates the backward reads. Written as ATen ops on the device tensors, so each runs the
// CPU kernel through the fallback; values differ from the CPU's unfused cell in the last bits
// (the sums are grouped differently), as they do on CUDA.
at::Tensor opt_or_undefined(const std::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); }

at::Tensor compute_dtype(const at::Tensor& t) {
  return at::isReducedFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t;
}

at::Tensor summed_gates(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                        const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = compute_dtype(input_gates) + compute_dtype(hidden_gates);
  const at::Tensor ib = opt_or_undefined(input_bias), hb = opt_or_undefined(hidden_bias);
  if (ib.defined()) gates = gates + compute_dtype(ib);
  if (hb.defined()) gates = gates + compute_dtype(hb);
  return gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(const at::Tensor& input_gates,
                                                               const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                               const std::optional<at::Tensor>& input_bias,
                                                               const std::optional<at::Tensor>& hidden_bias) {
  const auto dtype = input_gates.scalar_type();
  auto chunks = summed_gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  at::Tensor ig = chunks[0].sigmoid(), fg = chunks[1].sigmoid(), cg = chunks[2].tanh(), og = chunks[3].sigmoid();
  at::Tensor cy = fg * compute_dtype(cx) + ig * cg;
  at::Tensor hy = og * cy.tanh();
  at::Tensor workspace = at::cat({ig, fg, cg, og}, 1).to(dtype);
  return {hy.to(dtype), cy.to(dtype), workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(const std::optional<at::Tensor>& grad_hy,
                                                                        const std::optional<at::Tensor>& grad_cy,
                                                                        const at::Tensor& cx, const at::Tensor& cy,
                                                                        const at::Tensor& workspace, bool has_bias) {
  const auto dtype = workspace.scalar_type();
  auto gates = compute_dtype(workspace).chunk(4, 1);
  const at::Tensor &ig = gates[0], &fg = gates[1], &cg = gates[2], &og = gates[3];
  const at::Tensor go = opt_or_undefined(grad_hy), gc = opt_or_undefined(grad_cy);
  at::Tensor tanh_cy = compute_dtype(cy).tanh();
  at::Tensor gcx = go.defined() ? compute_dtype(go) * og * (1 - tanh_cy * tanh_cy) : at::zeros_like(tanh_cy);
  if (gc.defined()) gcx = gcx + compute_dtype(gc);
  at::Tensor gog = go.defined() ? compute_dtype(go) * tanh_cy : at::zeros_like(tanh_cy);
  at::Tensor gig = gcx * cg * (1 - ig) * ig;
  at::Tensor gfg = gcx * compute_dtype(cx) * (1 - fg) * fg;
  at::Tensor gcg = gcx * ig * (1 - cg * cg);
  gog = gog * (1 - og) * og;
  at::Tensor grad_gates = at::cat({gig, gfg, gcg, gog}, 1).to(dtype);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0, /*keepdim=*/false) : at::Tensor();
  return {grad_gates, (gcx * fg).to(dtype), grad_bias};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  const auto dtype = input_gates.scalar_type();
  at::Tensor ig_all = compute_dtype(input_gates), hg_all = compute_dtype(hidden_gates);
  const at::Tensor ib = opt_or_undefined(input_bias), hb = opt_or_undefined(hidden_bias);
  if (ib.defined()) ig_all = ig_all + compute_dtype(ib);
  if (hb.defined()) hg_all = hg_all + compute_dtype(hb);
  auto i = ig_all.chunk(3, 1);
  auto h = hg_all.chunk(3, 1);
  at::Tensor rg = (i[0] + h[0]).sigmoid(), zg = (i[1] + h[1]).sigmoid();
  at::Tensor ng = (i[2] + rg * h[2]).tanh();
  at::Tensor hx_c = compute_dtype(hx);
  at::Tensor hy = ng + zg * (hx_c - ng);
  at::Tensor workspace = at::cat({rg, zg, ng, hx_c, h[2]}, 1).to(dtype);
  return {hy.to(dtype), workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const auto dtype = workspace.scalar_type();
  auto w = compute_dtype(workspace).chunk(5, 1);
  const at::Tensor &rg = w[0], &zg = w[1], &ng = w[2], &hx = w[3], &hn = w[4];
  at::Tensor go = compute_dtype(grad_hy);
  at::Tensor gzg = go * (hx - ng) * (1 - zg) * zg;
  at::Tensor ghx = go * zg;
  at::Tensor gin = go * (1 - zg) * (1 - ng * ng);
  at::Tensor ghn = gin * rg;
  at::Tensor grg = gin * hn * (1 - rg) * rg;
  at::Tensor grad_input_gates = at::cat({grg, gzg, gin}, 1).to(dtype);
  at::Tensor grad_hidden_gates = at::cat({grg, gzg, ghn}, 1).to(dtype);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, ghx.to(dtype), grad_input_bias, grad_hidden_bias};
}

// Convolutions. ATen sends a backend without its own convolution kernels to the `_overrideable`
// pair (Convolution.cpp: ConvBackend::Overrideable for PrivateUse1), which has no kernel of its
// own. These run the CPU's whole convolution (its backend choice: mkldnn, slow_conv, depthwise)
// through the fallback, on the device tensors' memory, so values are the CPU's bit for bit.
c10::IValue int_list(c10::SymIntArrayRef values) { return c10::IValue(values.vec()); }

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  torch::jit::Stack stack{input,          weight, bias, int_list(stride), int_list(padding), int_list(dilation),
                          transposed,     int_list(output_padding), c10::IValue(groups)};
  neuron_fallback(op, &stack);
  return stack.back().toTensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  c10::IValue bias_sizes;  // None unless the bias gradient is wanted: then its length, out_channels
  if (output_mask[2]) {
    const c10::SymInt out_channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
    bias_sizes = c10::IValue(std::vector<c10::SymInt>{out_channels});
  }
  torch::jit::Stack stack{grad_output,
                          input,
                          weight,
                          bias_sizes,
                          int_list(stride),
                          int_list(padding),
                          int_list(dilation),
                          transposed,
                          int_list(output_padding),
                          c10::IValue(groups),
                          c10::IValue(c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}))};
  neuron_fallback(op, &stack);
  const size_t n = stack.size();
  auto tensor_or_undefined = [](const c10::IValue& v) { return v.isTensor() ? v.toTensor() : at::Tensor(); };
  return {tensor_or_undefined(stack[n - 3]), tensor_or_undefined(stack[n - 2]), tensor_or_undefined(stack[n - 1])};
}

// A host alias of a device tensor (for the simulator's process group: gloo runs on host tensors).
at::Tensor host_view(const at::Tensor& self) {
  if (!self.is_privateuseone()) return self;
  CallStorages storages;
  return storages.host(self);
}

}  // namespace

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &::sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>()); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

// A copy between the host and the device of a conjugated or negated view: _copy_from keeps the
// bits on the host aliases and the CPU's copy_ resolves them. Without these fallthroughs the
// Conjugate/Negative fallbacks materialise the source with clone(), whose copy_ is another
// _copy_from of the same view: unbounded recursion (torch.fft.hfft on the device segfaulted).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

// torch.autocast("neuron"): CUDA's whole policy, from the op lists torch's own CUDA registration
// expands (aten/src/ATen/autocast_mode.cpp registers AutocastCUDA from these macros of
// ATen/autocast_mode.h, there "to make sure other backends can reuse the policy op list"), so the
// lists are those of the torch this file is built against, never copied by hand: ops cast down to
// the autocast dtype (matmuls, convolutions, SDPA), ops run in float32 (layer_norm, losses,
// pointwise transcendentals), ops given dtype=float32 (softmax, sum, cumsum), ops run in the widest
// input type (addcmul, index_put), and binary_cross_entropy refused. TorchNeuron's own lists are
// not published (docs/simulator.md: unknown on trn2); CUDA's is the likeliest for a CUDA-like
// backend, and under bf16 it reproduces TRL #7664. tests/test_simulator_autocast.py checks at run
// time that every op with an AutocastCUDA kernel has one here.
// The lists' signatures name Tensor, Scalar, ScalarType and IntArrayRef unqualified, as inside at::.
namespace neuron_autocast {
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                              int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP)
  KERNEL_PRIVATEUSEONE(cudnn_convolution, lower_precision_fp)  // CUDA's registration adds these two
  KERNEL_PRIVATEUSEONE(cudnn_convolution_transpose, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NEURON_FP32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace neuron_autocast

// What the Python side calls with tensors or generators.
TORCH_LIBRARY(neuroncompat_sim, m) {
  m.def("host_view(Tensor self) -> Tensor");
  m.def("default_generator(int core) -> Generator?");
  m.def("segments(int core) -> int[]");
}

TORCH_LIBRARY_IMPL(neuroncompat_sim, PrivateUse1, m) { m.impl("host_view", TORCH_FN(host_view)); }

TORCH_LIBRARY_IMPL(neuroncompat_sim, CPU, m) { m.impl("host_view", TORCH_FN(host_view)); }

TORCH_LIBRARY_IMPL(neuroncompat_sim, CompositeExplicitAutograd, m) {
  m.impl("default_generator", [](int64_t core) -> at::Generator {
    check_index(static_cast<c10::DeviceIndex>(core));
    return default_generator(static_cast<c10::DeviceIndex>(core));
  });
  m.impl("segments", [](int64_t core) -> std::vector<int64_t> {
    check_index(static_cast<c10::DeviceIndex>(core));
    return g_pool.segments(static_cast<int>(core));
  });
}

extern "C" {

// Registers the guard, hooks and allocator for PrivateUse1 and the host redirect as the CPU
// allocator; returns 0 on success, 1 when PrivateUse1 already has a device guard, 2 when it
// already has hooks (another backend owns the device).
// Ops with a CPU kernel and a CompositeExplicitAutograd(NonFunctional) one reach PrivateUse1
// through the composite kernel, not the fallback: native_layer_norm and native_group_norm then
// run ATen's reference math (math_native_layer_norm), whose values differ from the CPU's kernel
// in the last bits, and structured ops (add.Tensor, mul_, ...) run as empty + meta + the out=
// variant, three dispatches where one will do. Each gets the fallback registered for PrivateUse1
// explicitly, so it runs the CPU's own kernel. Views (a non-mutable aliased return) keep their
// composite kernels, as do ops the backend implements itself.
// A composite op (layer_norm, matmul, dropout: CompositeImplicitAutograd) reaches no backend: it
// runs as the ops it decomposes into, above the device. A watched one gets, while watched, a
// kernel at AutogradPrivateUse1 that reports it and then runs its decomposition, as the composite
// kernel would: below autograd, whose inner ops dispatch afresh, so they record their own gradients.
static void report_composite(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  if (info.watched) notify(info.name, 1);
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

static void watch_composites(const std::unordered_set<std::string>& names) {
  static std::unique_ptr<torch::Library> library;
  library.reset();  // drops the kernels of the previous watch
  if (names.empty()) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradPrivateUse1,
                                             __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    if (names.count(name.name) == 0 && names.count(full) == 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value() || !handle->hasSchema() ||
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::AutogradPrivateUse1))
      continue;
    library->impl(full.substr(6).c_str(), torch::CppFunction::makeFromBoxedFunction<&report_composite>());
  }
}

static void route_cpu_kernels_to_fallback() {
  static torch::Library* library =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value() || !handle->hasSchema()) continue;
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
      continue;
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      continue;
    bool view = false;
    for (const c10::Argument& r : handle->schema().returns()) {
      if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) view = true;
    }
    if (view) continue;
    const std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
  }
}

int neuroncompat_register() {
  if (c10::impl::hasDeviceGuardImpl(kNeuron)) return 1;
  if (at::isPrivateUse1HooksRegistered()) return 2;
  c10::impl::registerDeviceGuard(kNeuron, &g_guard);
  at::RegisterPrivateUse1HooksInterface(&g_hooks);
  c10::SetAllocator(kNeuron, &g_allocator);
  g_host_redirect.base = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&g_host_redirect, /*priority=*/1);
  route_cpu_kernels_to_fallback();
  return 0;
}

void neuroncompat_configure(int cores, int default_device) {
  g_cores.store(cores);
  g_default_device.store(default_device);
}

void neuroncompat_configure_memory(int64_t capacity, int64_t cache_limit) {
  g_pool.configure(static_cast<size_t>(capacity), static_cast<size_t>(cache_limit));
}

void neuroncompat_set_available(int available) { g_available.store(available != 0); }

// The ops torch's native_functions.yaml marks `device_check: NoCheck` ("add.Tensor,copy_,..."),
// before the first op runs (see DeviceCheck).
void neuroncompat_set_unchecked_ops(const char* names) {
  {
    std::lock_guard<std::mutex> lock(g_unchecked_mutex);
    g_unchecked = split_names(names);
  }
  g_watch_generation.fetch_add(1);  // recompute each op's OpInfo
}

int neuroncompat_current_device() { return current_index(); }

void neuroncompat_set_current_device(int index) { t_current = index; }

// The op observer: `fn(op, events)` for the ops named in `watched` (comma-separated, with or
// without the overload) and, while fn is set, for complex and float64 results. nullptr removes it.
void neuroncompat_set_observer(ObserverFn fn, const char* watched) {
  std::unordered_set<std::string> names = split_names(watched);
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    g_watched = names;
  }
  std::unordered_set<std::string> aten;
  for (const std::string& n : names) {
    if (n.rfind("aten::", 0) == 0) aten.insert(n);
  }
  watch_composites(fn != nullptr ? aten : std::unordered_set<std::string>{});
  g_observer.store(fn);
  g_watch_generation.fetch_add(1);
}

}  // extern "C"
