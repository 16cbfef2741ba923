// What the boxed fallback (fallback.cpp) and the files beside it share: what it works out once
// per op schema (OpInfo), the device checks it applies (device_checks.cpp), and the fallback
// itself, which the convolution kernels (accelerator_paths.cpp) call.

#pragma once

#include "neuron_device.h"

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <vector>

namespace c10 {
class OperatorHandle;
struct IValue;
}  // namespace c10

namespace neuron_sim {

// Which device check an op gets, as CUDA's (device_checks.cpp says how it is decided).
enum class DeviceCheck { kExactSame, kTensorIterator, kIndexing, kCopy };

// What the fallback needs to know about an op, worked out once per schema (per thread).
struct OpInfo {
  std::string name;  // aten::add.Tensor
  DeviceCheck check = DeviceCheck::kExactSame;
  std::string method;             // CUDA's wording of the kernel in its error: wrapper_PrivateUse1_add_Tensor
  std::vector<int> checked_args;  // out= then positional arguments, the order torchgen checks them
  int indices_arg = -1;           // an index op's `Tensor?[] indices`
  int values_arg = -1;            // index_put's `Tensor values`
  bool random = false;
  int generator_arg = -1;
  bool refused = false;
  bool watched = false;
  bool mask_indexing = false;
  std::vector<int> write_args;     // arguments the op writes (in-place self, out=)
  std::vector<int> write_returns;  // for each return, the argument it is (or -1)
  std::vector<std::string> arg_names;
  uint64_t generation = 0;
};

// fallback.cpp
const OpInfo& op_info(const c10::OperatorHandle& op);
void neuron_fallback(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
void route_cpu_kernels_to_fallback();

// device_checks.cpp
// The check for an op named `short_name` ("add.Tensor", or another library's "ns::op") with an
// index op's `indices` argument or not.
DeviceCheck device_check_of(const std::string& short_name, bool aten, bool indexing);
// The op's device check, given a CPU tensor among `args` beside a tensor on core `core`.
void check_devices(const OpInfo& info, c10::ArrayRef<c10::IValue> args, int core);
[[noreturn]] void mixed_devices(const std::string& op, int first, const std::string& other);

}  // namespace neuron_sim
