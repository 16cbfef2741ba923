// What the Python side (neuroncompat/simulator/native_device.py) calls: neuroncompat_register,
// which makes this library PrivateUse1's backend (the guard, hooks and allocator, the host
// redirect as the CPU allocator, the CPU kernels routed to the fallback), and the
// neuroncompat_sim ops, which pass tensors and generators (torch_openreg: its Python module's
// C functions). The other extern "C" setters live with the capability they set
// (neuroncompat_configure in guard.cpp, neuroncompat_configure_memory in allocator.cpp, ...).

#include "fallback.h"
#include "host_alias.h"

#include <ATen/core/Generator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

TORCH_LIBRARY(neuroncompat_sim, m) {
  m.def("host_view(Tensor self) -> Tensor");
  m.def("default_generator(int core) -> Generator?");
  m.def("segments(int core) -> int[]");
}

TORCH_LIBRARY_IMPL(neuroncompat_sim, PrivateUse1, m) { m.impl("host_view", TORCH_FN(neuron_sim::host_view)); }

TORCH_LIBRARY_IMPL(neuroncompat_sim, CPU, m) { m.impl("host_view", TORCH_FN(neuron_sim::host_view)); }

TORCH_LIBRARY_IMPL(neuroncompat_sim, CompositeExplicitAutograd, m) {
  m.impl("default_generator", [](int64_t core) -> at::Generator {
    neuron_sim::check_index(static_cast<c10::DeviceIndex>(core));
    return neuron_sim::default_generator(static_cast<c10::DeviceIndex>(core));
  });
  m.impl("segments", [](int64_t core) -> std::vector<int64_t> {
    neuron_sim::check_index(static_cast<c10::DeviceIndex>(core));
    return neuron_sim::pool_segments(static_cast<int>(core));
  });
}

// Registers the guard, hooks and allocator for PrivateUse1 and the host redirect as the CPU
// allocator; returns 0 on success, 1 when PrivateUse1 already has a device guard, 2 when it
// already has hooks (another backend owns the device).
extern "C" int neuroncompat_register() {
  using namespace neuron_sim;
  if (c10::impl::hasDeviceGuardImpl(kNeuron)) return 1;
  if (hooks_registered()) return 2;
  install_guard();
  install_hooks();
  install_allocator();
  install_host_redirect();
  route_cpu_kernels_to_fallback();
  return 0;
}
