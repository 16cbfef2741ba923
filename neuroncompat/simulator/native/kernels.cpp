// Kernels of its own (torch_openreg: aten/OpenRegMinimal): the ops that create, copy, view and
// re-seat a device tensor's memory. The fallback cannot run these as CPU kernels: an empty
// tensor must come from the device allocator, a copy crosses the host and the device, and views
// and storage changes act on the device tensor itself (views share its storage; no host alias is
// needed). Each allocating op runs under the device guard of the tensor it allocates for, so a
// tensor on neuron:1 keeps its memory on core 1 whichever core is current. Creating a complex or
// float64 tensor is reported to the observer (TorchNeuron treats those dtypes specially).

#include "host_alias.h"

#include <ATen/DeviceGuard.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace neuron_sim {
namespace {

void check_strided(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "the simulated neuron device holds strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
}

void note_dtype(const char* op, c10::ScalarType dtype) {
  if (!observing()) return;
  const int events = dtype_events(dtype);
  if (events != 0) notify(op, events);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_strided(layout, pin_memory);
  const c10::DeviceGuard guard(resolved(c10::device_or_default(device)));
  const auto type = c10::dtype_or_default(dtype);
  note_dtype("aten::empty.memory_format", type);
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type,
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_strided(layout, pin_memory);
  const c10::DeviceGuard guard(resolved(c10::device_or_default(device)));
  const auto type = c10::dtype_or_default(dtype);
  note_dtype("aten::empty_strided", type);
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  CallStorages storages;
  storages.index = dst.is_privateuseone() ? dst.device().index() : self.device().index();
  at::Tensor src_host = storages.host(self);
  at::Tensor dst_host = storages.host(dst);
  {
    KernelCoreGuard kernel(storages.index);
    at::native::copy_(dst_host, src_host, non_blocking);
  }
  if (dst.is_privateuseone() && !self.is_privateuseone()) note_dtype("aten::_copy_from", dst.scalar_type());
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  {
    const at::OptionalDeviceGuard guard(at::device_of(dst));  // the new bytes are dst's core's
    at::native::resize_(dst, self.sizes(), std::nullopt);
  }
  return copy_from(self, dst, false);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

// The ops below may allocate (a storage that grows, a new empty one). The allocator serves the
// current core, so each runs under the guard of the tensor it allocates for, as CUDA's generated
// kernels do (an OptionalDeviceGuard on device_of(self)): a tensor on neuron:1 resized while
// neuron:0 is current keeps its memory on core 1.
const at::Tensor& resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> format) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::resize_(self, size, format);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  const at::OptionalDeviceGuard guard(at::device_of(self));
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(), /*resizable=*/true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(storage));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

// Tensor.record_stream: TorchNeuron's caching allocator records the stream that uses a block (FSDP1 records
// each unsharded gradient on its post-backward stream). The simulated core runs one in-order stream, so a
// block is never reused before that stream is done with it: nothing to record beyond the checks.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(self.is_privateuseone(), "record_stream: expected a neuron tensor, but got ", self.device());
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a neuron stream, but got device type ", stream.device_type());
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, size_t newsize) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  if (newsize == 0) {
    // Freeing keeps the storage on its core, as TorchNeuron's resizePrivateUse1Bytes and CUDA's
    // resize_bytes_cuda do (a null DataPtr tagged with the storage's device). resize_bytes_cpu would
    // leave an untagged one, a "cpu" storage: FSDP1's shard() then fails to set_() the flat parameter
    // to its shard, and regrowing lands on the current core instead of the storage's.
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    impl->set_data_ptr_noswap(c10::DataPtr(nullptr, storage.device()));
    impl->set_nbytes(0);
    return;
  }
  at::native::resize_bytes_cpu(impl, newsize);
}

}  // namespace neuron_sim

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace neuron_sim;
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("record_stream", TORCH_FN(record_stream));
}

// A copy between the host and the device of a conjugated or negated view: _copy_from keeps the
// bits on the host aliases and the CPU's copy_ resolves them. Without these fallthroughs the
// Conjugate/Negative fallbacks materialise the source with clone(), whose copy_ is another
// _copy_from of the same view: unbounded recursion (torch.fft.hfft on the device segfaulted).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

