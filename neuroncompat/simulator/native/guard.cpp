// Device guard, streams and events: which core is current, per thread, as CUDA's (torch_openreg:
// OpenRegGuard). PyTorch asks the guard whenever an op or `torch.neuron.device(...)` changes or
// reads the current device, and for each stream and event; `neuron` with no index means the
// current core. One in-order stream per core: every op has finished on the CPU when it returns,
// so events and stream waits have nothing to order. An index past the visible cores raises
// everywhere, as CUDA's "invalid device ordinal".

#include "neuron_device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>

namespace neuron_sim {
namespace {

std::atomic<int> g_cores{1};
std::atomic<int> g_default_device{0};
thread_local int t_current = -1;  // -1: this thread never chose a core; it is on the default

// A stream or event asked for by device: on a core that exists.
c10::Device checked(c10::Device device) {
  c10::Device d = resolved(device);
  check_index(d.index());
  return d;
}

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
  c10::DeviceIndex deviceCount() const noexcept override { return core_count(); }
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

NeuronGuard g_guard;

}  // namespace

c10::DeviceIndex current_index() {
  return static_cast<c10::DeviceIndex>(t_current >= 0 ? t_current : g_default_device.load());
}

void set_current_index(c10::DeviceIndex index) { t_current = index; }

void check_index(c10::DeviceIndex index) {
  const int cores = g_cores.load();
  TORCH_CHECK(
      index >= 0 && index < cores,
      "neuron:", static_cast<int>(index), " is not a valid device: ", cores,
      " simulated NeuronCore(s) are visible (valid indices 0..", cores - 1, ")");
}

c10::DeviceIndex core_count() { return static_cast<c10::DeviceIndex>(g_cores.load()); }

c10::Device resolved(c10::Device device) {
  return device.has_index() ? device : c10::Device(kNeuron, current_index());
}

void install_guard() { c10::impl::registerDeviceGuard(kNeuron, &g_guard); }

}  // namespace neuron_sim

extern "C" {

void neuroncompat_configure(int cores, int default_device) {
  neuron_sim::g_cores.store(cores);
  neuron_sim::g_default_device.store(default_device);
}

int neuroncompat_current_device() { return neuron_sim::current_index(); }

void neuroncompat_set_current_device(int index) { neuron_sim::t_current = index; }

}  // extern "C"
