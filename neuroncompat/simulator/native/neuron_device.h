// What the simulated NeuronCore's files share: the device type, the current core, the pool every
// core's memory comes from, the host redirect, the pinned allocator, the generators and the op
// observer. Only c10's light headers are included here (a file that needs ATen includes it
// itself): every .cpp includes this one, and torch's full headers cost ~10 s of compiler time
// per file that includes them.
//
// The simulator is torch_openreg's shape (PyTorch's reference out-of-tree PrivateUse1 backend,
// test/cpp_extensions/open_registration_extension/torch_openreg): one capability per file,
//
//   guard.cpp            which core is current (per thread), streams and events
//   allocator.cpp        per-core host memory: caching pool, CUDA-style statistics, 24 GiB limit
//   host_redirect.cpp    CPU allocations inside a CPU kernel run for a core come from its pool
//   pinned_memory.cpp    pin_memory()'s host allocator
//   generator.cpp        TorchNeuron's (seed, offset) random state
//   hooks.cpp            PrivateUse1 hooks: availability, core count, generators, pinned memory
//   host_alias.cpp       CPU tensors over a device tensor's bytes and back, checked in bounds
//   observer.cpp         tells `neuroncompat simulate` about the ops it watches
//   device_checks.cpp    CUDA's rules for tensors on different devices in one op
//   fallback.cpp         every op without a kernel of its own: the CPU kernel on device memory
//   kernels.cpp          ATen kernels of its own: empty, copies, views, set_/resize_
//   accelerator_paths.cpp  ops ATen sends down an accelerator-only path (SDPA's choice,
//                        convolution, fused RNN cells), answered the CPU's way
//   autocast.cpp         torch.autocast("neuron"): CUDA's policy
//   register.cpp         what the Python side calls: registration, the neuroncompat_sim ops
//
// The Python side (neuroncompat/simulator/native_device.py) compiles every .cpp here and links
// them into one library, keyed on every file in this directory.

#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace at {
struct Generator;
}  // namespace at
namespace c10 {
struct Storage;
}  // namespace c10

namespace neuron_sim {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
constexpr int kMaxCores = 128;  // c10::DeviceIndex is an int8

// guard.cpp: the current core (per thread, as CUDA's) and the visible cores.
c10::DeviceIndex current_index();
void set_current_index(c10::DeviceIndex index);  // unchecked: callers check_index first
void check_index(c10::DeviceIndex index);        // raises unless 0 <= index < core_count()
c10::DeviceIndex core_count();
c10::Device resolved(c10::Device device);  // `neuron` -> `neuron:<current>`
void install_guard();

// allocator.cpp: every core's memory.
c10::Allocator* device_allocator();  // the PrivateUse1 allocator (serves the current core)
c10::DataPtr pool_allocate(size_t requested, int core, c10::Device tag);
std::optional<int> pool_core_of(const void* ptr);
std::vector<int64_t> pool_segments(int core);  // address, size, requested, in use; per block
void install_allocator();

// host_redirect.cpp: while a KernelCoreGuard for core N is alive on a thread, the CPU allocator
// hands out core N's memory there.
struct KernelCoreGuard {
  explicit KernelCoreGuard(int core);
  ~KernelCoreGuard();
  KernelCoreGuard(const KernelCoreGuard&) = delete;
  KernelCoreGuard& operator=(const KernelCoreGuard&) = delete;
  int previous;
};
c10::Allocator* host_redirect_allocator();
void install_host_redirect();

// pinned_memory.cpp
c10::Allocator* pinned_allocator();
bool is_pinned(const void* data);

// generator.cpp
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);
uint64_t mix(uint64_t seed, uint64_t offset);  // the CPU generator's seed for (seed, offset)

// kernels.cpp: grow or shrink a storage on its own core (storage.resize_()).
void resize_storage_bytes(const c10::Storage& storage, size_t newsize);

// hooks.cpp
bool hooks_registered();
void install_hooks();

// observer.cpp: events 1 a watched op ran, 2 it indexed with a boolean/uint8 mask, 4 it made a
// complex tensor on the device, 8 a float64 one.
bool observing();  // an observer is set
void notify(const std::string& op, int events);
int dtype_events(c10::ScalarType dtype);
bool watched(const std::string& base, const std::string& name);  // "aten::index", "aten::index.Tensor"
uint64_t watch_generation();  // changes whenever what an op's OpInfo holds may have changed
void bump_watch_generation();

// "a,b,c" -> {a, b, c} (observer.cpp; also the device checks' op names)
std::unordered_set<std::string> split_names(const char* names);

}  // namespace neuron_sim
