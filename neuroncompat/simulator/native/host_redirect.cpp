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

struct HostRedirectAllocator final : public c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    if (t_kernel_core < 0) return base->allocate(n);
    return pool_allocate(n, t_kernel_core, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return base->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

HostRedirectAllocator g_host_redirect;

}  // namespace

KernelCoreGuard::KernelCoreGuard(int core) : previous(t_kernel_core) { t_kernel_core = core; }

KernelCoreGuard::~KernelCoreGuard() { t_kernel_core = previous; }

c10::Allocator* host_redirect_allocator() { return &g_host_redirect; }

void install_host_redirect() {
  g_host_redirect.base = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&g_host_redirect, /*priority=*/1);
}

}  // namespace neuron_sim
