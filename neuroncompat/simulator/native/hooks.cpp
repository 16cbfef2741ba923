// Hooks (torch_openreg: OpenRegHooks): what PyTorch asks a PrivateUse1 backend outside any op:
// whether it is built and available (`torch.neuron.is_available()`, `torch.accelerator`), the
// core count and current core, each core's default and new generators, pinned host memory
// (`pin_memory()`, `is_pinned()`), which device a pointer belongs to, and resizing a storage
// (`untyped_storage().resize_()`, as FSDP2 frees and re-grows parameters).

#include "neuron_device.h"

#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Storage.h>

#include <atomic>

namespace neuron_sim {
namespace {

std::atomic<bool> g_available{false};

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_available.load(); }
  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override { return g_available.load(); }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return core_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_index(device);
    set_current_index(device);
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
    return new_generator(index);
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  at::Device getDeviceFromPtr(void* data) const override {
    auto core = pool_core_of(data);
    return core ? c10::Device(kNeuron, static_cast<c10::DeviceIndex>(*core)) : c10::Device(c10::kCPU);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    const c10::DeviceGuard guard(storage.device());  // the storage's core, not the current one
    resize_storage_bytes(storage, newsize);
  }
};

NeuronHooks g_hooks;

}  // namespace

bool hooks_registered() { return at::isPrivateUse1HooksRegistered(); }

void install_hooks() { at::RegisterPrivateUse1HooksInterface(&g_hooks); }

}  // namespace neuron_sim

extern "C" void neuroncompat_set_available(int available) { neuron_sim::g_available.store(available != 0); }
