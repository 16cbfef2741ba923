// Generator: a core's random state (torch_openreg: OpenRegGenerator), what
// `torch.neuron.manual_seed`, `get_rng_state`/`set_rng_state`, DTensor's RNG tracker and every
// random op (dropout, rand, randn, multinomial) read. Kept as TorchNeuron keeps it (AWS Neuron
// docs, "Random number generation"): a seed and an offset into its stream, 16 bytes, and a
// nondeterministic seed until seeded. How TorchNeuron's kernels turn (seed, offset) into values is
// not public; the simulator follows CUDA's contract: a random op draws from a CPU generator seeded
// by mixing (seed, offset) (splitmix64), then advances the offset by the values drawn, rounded up
// to 4 (a Philox call's width; DTensor aligns shard offsets to 4; the fallback does this). The
// same (seed, offset) gives the same values.

#include "neuron_device.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstring>
#include <mutex>

namespace neuron_sim {
namespace {

constexpr int64_t kStateBytes = 16;  // uint64 seed, then int64 offset (TorchNeuron's layout)

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

}  // namespace

uint64_t mix(uint64_t seed, uint64_t offset) {
  uint64_t z = seed ^ (offset * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::array<at::Generator, kMaxCores> generators;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  at::Generator& gen = generators.at(index);
  if (!gen.defined()) gen = at::make_generator<NeuronGenerator>(index);
  return gen;
}

at::Generator new_generator(c10::DeviceIndex index) { return at::make_generator<NeuronGenerator>(index); }

}  // namespace neuron_sim
