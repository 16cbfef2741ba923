// Host redirect: how a CPU kernel's outputs become device memory with no copy. The fallback
// (fallback.cpp) runs each op's CPU kernel on host aliases of the device tensors; while it runs
// for core N (a KernelCoreGuard is alive on the thread), the CPU allocator hands out core N's
// memory (tagged CPU, since the kernel computes on CPU tensors); everywhere else it is the CPU
// allocator it replaced. So an op's outputs, and its temporaries, are device memory, counted in
// the core's statistics, and become device tensors without a copy. torch_openreg has no
// counterpart: its kernels are its own, not the CPU's.

#include "neuron_device.h"

#include <c10/core/CPUAllocator.h>

#include <cstring>

namespace neuron_sim {
namespace {

thread_local int t_kernel_core = -1;
c10::DeleterFnPtr g_base_raw_deleter = nullptr;

// What raw_deallocate frees with. A kernel's library may take raw memory (raw_allocate: oneDNN's
// scratch buffers for a bf16 matmul) inside the kernel, from core N's pool, and give it back
// later through raw_deleter(): a pool block must go back to the pool, or the core's statistics
// count it as allocated forever (each bf16 matmul leaked its scratch size from
// memory_allocated); anything else goes to the CPU allocator's own deleter.
void raw_delete(void* ptr) {
  if (pool_core_of(ptr).has_value()) {
    device_allocator()->raw_deleter()(ptr);
  } else {
    g_base_raw_deleter(ptr);
  }
}

struct HostRedirectAllocator final : public c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    if (t_kernel_core < 0) return base->allocate(n);
    return pool_allocate(n, t_kernel_core, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostRedirectAllocator g_host_redirect;

}  // namespace

KernelCoreGuard::KernelCoreGuard(int core) : previous(t_kernel_core) { t_kernel_core = core; }

KernelCoreGuard::~KernelCoreGuard() { t_kernel_core = previous; }

c10::Allocator* host_redirect_allocator() { return &g_host_redirect; }

void install_host_redirect() {
  g_host_redirect.base = c10::GetCPUAllocator();
  g_base_raw_deleter = g_host_redirect.base->raw_deleter();
  c10::SetCPUAllocator(&g_host_redirect, /*priority=*/1);
}

}  // namespace neuron_sim
