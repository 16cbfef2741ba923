// Host aliases (host_alias.cpp): a CPU tensor over a device tensor's own bytes, and a device
// tensor over a CPU result's, for the files that run CPU kernels on device memory (the fallback,
// the copy kernels, SDPA's choice, the process group's host_view).

#pragma once

#include "neuron_device.h"

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace neuron_sim {

// Raises (a RuntimeError naming the tensor's size and its storage's) when a device tensor's
// storage no longer holds it: freed with `untyped_storage().resize_(0)`, or shrunk.
void check_in_storage(const at::Tensor& t);

// The storages one op call has seen, so that two arguments over the same device storage share
// one host storage and an output over an input's host storage is a view of that input.
struct CallStorages {
  struct Entry {
    c10::StorageImpl* host;
    c10::Storage device;
    c10::DispatchKeySet keys;
  };
  c10::SmallVector<Entry, 8> entries;
  c10::DeviceIndex index = -1;  // the core that device() puts results on

  // A device tensor's host alias (checked in bounds); any other tensor as it is.
  at::Tensor host(const at::Tensor& t);
  // A CPU result as a device tensor on `index` (a view of the argument whose host alias it shares).
  at::Tensor device(const at::Tensor& h);
  // After an op wrote `host` (an argument's host alias): carry a resize or a new storage back to
  // the device tensor `target`.
  void write_back(const at::Tensor& target, const at::Tensor& host);
};

// A host alias of a device tensor (the neuroncompat_sim::host_view op: gloo runs on host tensors).
at::Tensor host_view(const at::Tensor& self);

}  // namespace neuron_sim
