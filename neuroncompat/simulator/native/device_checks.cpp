// Device checks: what happens when one op is given tensors on different devices. Code written
// for CUDA relies on CUDA's answers (a CPU tensor beside a device tensor raises, a 0-dim CPU
// tensor is a scalar in elementwise ops, CPU indices are accepted), so the simulator gives the
// same ones, from torch's own source rather than a list kept here: torchgen generates a check
// that every positional and out= tensor is on one device (no CPU tensor, not even a 0-dim one)
// for each op unless native_functions.yaml says `device_check: NoCheck`; such an op's kernel
// checks for itself. Among those, TensorIterator's accepts one 0-dim CPU input as a scalar; the
// index ops' accept indices on the CPU; copies accept any pair of devices. The NoCheck names come
// from the yaml torch ships (torchgen), read by the Python side
// (neuroncompat/simulator/device_checks.py) and set before the first op. The fallback
// (fallback.cpp) applies the check whenever a CPU tensor is among a device op's arguments.

#include "fallback.h"

#include <ATen/core/ivalue.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <ATen/core/op_registration/adaption.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

namespace neuron_sim {
namespace {

std::mutex g_unchecked_mutex;
std::unordered_set<std::string> g_unchecked;  // "add.Tensor", "copy_": the NoCheck ops

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

}  // namespace

DeviceCheck device_check_of(const std::string& short_name, bool aten, bool indexing) {
  bool unchecked = !aten;  // another library's op: its kernel's own rules, taken as TensorIterator's
  if (aten) {
    std::lock_guard<std::mutex> lock(g_unchecked_mutex);
    unchecked = g_unchecked.count(short_name) > 0;
  }
  if (!unchecked) return DeviceCheck::kExactSame;
  if (indexing) return DeviceCheck::kIndexing;
  if (short_name.find("copy") != std::string::npos) return DeviceCheck::kCopy;
  return DeviceCheck::kTensorIterator;
}

[[noreturn]] void mixed_devices(const std::string& op, int first, const std::string& other) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:", first,
              " and ", other, "! (when checking argument for ", op, ")");
}

// The device check of an op given a CPU tensor beside a tensor on core `core` (see DeviceCheck).
void check_devices(const OpInfo& info, c10::ArrayRef<c10::IValue> args, int core) {
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

}  // namespace neuron_sim

// The ops torch's native_functions.yaml marks `device_check: NoCheck` ("add.Tensor,copy_,..."),
// before the first op runs.
extern "C" void neuroncompat_set_unchecked_ops(const char* names) {
  {
    std::lock_guard<std::mutex> lock(neuron_sim::g_unchecked_mutex);
    neuron_sim::g_unchecked = neuron_sim::split_names(names);
  }
  neuron_sim::bump_watch_generation();  // recompute each op's OpInfo
}
