// Pinned host memory (torch_openreg: OpenRegHostAllocator): what `tensor.pin_memory()`,
// `DataLoader(pin_memory=True)` and `is_pinned()` use on a device. Plain host memory whose blocks
// are remembered, so is_pinned() is true for tensors (and views into them) that pin_memory() made.
// On the simulator pinning changes no value; whether TorchNeuron's allocator page-locks is not
// documented.

#include "neuron_device.h"

#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <map>
#include <mutex>

namespace neuron_sim {
namespace {

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

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned; }

bool is_pinned(const void* data) { return PinnedAllocator::contains(data); }

}  // namespace neuron_sim
