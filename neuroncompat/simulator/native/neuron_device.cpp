// The simulated NeuronCore's device guard, backend hooks and generator, in C++.
//
// Why C++: PyTorch resolves an index-less device ("neuron"), creates streams and creates
// `torch.Generator(device="neuron")` through the PrivateUse1 backend's DeviceGuardImplInterface
// and PrivateUse1HooksInterface. The versions a Python backend can register
// (torch._C._acc.DeviceGuard / PrivateUse1Hooks) hard-code the current device to index 0, make
// setDevice a no-op, report one device and cannot make a generator. So `torch.tensor(x,
// device="neuron")` after `torch.neuron.set_device(1)` landed on core 0, streams reported core 0
// and device generators raised NotImplementedError. These classes give PyTorch the simulator's
// current core (per thread, as CUDA's current device), its core count, per-device streams and a
// (seed, offset) generator with TorchNeuron's 16-byte state (docs/simulator.md).
//
// The Python side (neuroncompat/simulator/native_device.py) builds this file once per torch
// build, loads it with ctypes and calls the extern "C" functions at the bottom.

#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
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

// One in-order stream per core: every op has finished on the CPU when it returns, so events
// and stream waits have nothing to order.
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
    return c10::Stream(c10::Stream::DEFAULT, resolved(device));
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

// A core's random state as TorchNeuron keeps it: a seed and an offset into its stream. The
// simulator draws from a CPU generator keyed by (seed, offset) and advances the offset
// (neuroncompat/simulator/rng.py); this object only holds and serialises the pair.
struct NeuronGenerator final : public c10::GeneratorImpl {
  explicit NeuronGenerator(c10::DeviceIndex index)
      : c10::GeneratorImpl(c10::Device(kNeuron, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {
    seed();  // TorchNeuron: a generator not seeded explicitly starts from a nondeterministic seed
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
  at::Generator getNewGenerator(c10::DeviceIndex device_index = -1) const override {
    c10::DeviceIndex index = device_index >= 0 ? device_index : current_index();
    check_index(index);
    return at::make_generator<NeuronGenerator>(index);
  }
  // A simulated tensor's own storage holds no bytes (its data is a CPU tensor): Dynamo's
  // fakeification resizes an empty one to 0, which must succeed; any other resize is refused.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(newsize == storage.nbytes(), "cannot resize the storage of a simulated neuron tensor (",
                storage.nbytes(), " -> ", newsize, " bytes)");
  }
};

NeuronGuard g_guard;
NeuronHooks g_hooks;

}  // namespace

extern "C" {

// Registers the guard and hooks for PrivateUse1; returns 0 on success, 1 when PrivateUse1
// already has a device guard, 2 when it already has hooks (another backend owns the device).
int neuroncompat_register() {
  if (c10::impl::hasDeviceGuardImpl(kNeuron)) return 1;
  if (at::isPrivateUse1HooksRegistered()) return 2;
  c10::impl::registerDeviceGuard(kNeuron, &g_guard);
  at::RegisterPrivateUse1HooksInterface(&g_hooks);
  return 0;
}

void neuroncompat_configure(int cores, int default_device) {
  g_cores.store(cores);
  g_default_device.store(default_device);
}

void neuroncompat_set_available(int available) { g_available.store(available != 0); }

int neuroncompat_current_device() { return current_index(); }

void neuroncompat_set_current_device(int index) { t_current = index; }

}  // extern "C"
