// Host aliases: how a CPU kernel runs on a device tensor's memory with nothing copied, which is
// what makes the simulator's numerics the CPU's bit for bit at about the CPU's cost. A CPU kernel
// runs on a CPU tensor over the device tensor's own bytes: its storage's data pointer is the
// device storage's, and it keeps the device storage alive. A CPU result becomes a device tensor
// the other way round: a device storage over the CPU storage's bytes, keeping that alive. Each
// wrapper knows its partner through its DataPtr's context, so a round trip returns the original
// storage (view outputs share their input's storage, and storage identity, as on any device).
// An alias is only built over memory the storage still holds: reading freed memory raises, as a
// device's illegal memory access does, instead of crashing the process. torch_openreg has no
// counterpart (its kernels are its own).

#include "host_alias.h"

#include <ATen/EmptyTensor.h>

namespace neuron_sim {
namespace {

void release_device_storage(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }
void release_host_storage(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

c10::Storage partner(const c10::Storage& storage, c10::DeleterFnPtr deleter) {
  const c10::DataPtr& dp = storage.unsafeGetStorageImpl()->data_ptr();
  if (dp.get_deleter() != deleter) return c10::Storage();
  return c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(static_cast<c10::StorageImpl*>(dp.get_context())));
}

c10::Storage wrap_storage(const c10::Storage& inner, c10::DeleterFnPtr deleter, c10::Device tag, c10::Allocator* allocator) {
  c10::StorageImpl* impl = inner.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr dp(impl->data_ptr().get(), impl, deleter, tag);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
                                                            std::move(dp), allocator, /*resizable=*/true));
}

// Host storage for a device storage.
c10::Storage host_storage(const c10::Storage& device) {
  c10::Storage held = partner(device, &release_host_storage);
  if (held) return held;
  return wrap_storage(device, &release_device_storage, c10::Device(c10::kCPU), host_redirect_allocator());
}

// Device storage (on core `index`) for a host storage.
c10::Storage device_storage(const c10::Storage& host, c10::DeviceIndex index) {
  c10::Storage held = partner(host, &release_device_storage);
  if (held) return held;
  return wrap_storage(host, &release_host_storage, c10::Device(kNeuron, index), device_allocator());
}

at::Tensor tensor_on(c10::Storage storage, const at::Tensor& like, c10::DispatchKeySet keys, bool view) {
  c10::intrusive_ptr<c10::TensorImpl> impl =
      view ? c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, std::move(storage), keys, like.dtype())
           : c10::make_intrusive<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) impl->_set_conj(true);
  if (like.is_neg()) impl->_set_neg(true);
  return at::Tensor(std::move(impl));
}

}  // namespace

// A device tensor whose storage no longer holds it (freed with `untyped_storage().resize_(0)`, as
// FSDP2 frees parameters between uses, or shrunk) must not be read: on a device that is an
// illegal memory access, and here a host alias over it would let a CPU kernel read freed memory.
// The sizes are torch's own (at::detail::computeStorageNbytes, as checkInBoundsForStorage).
void check_in_storage(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->has_symbolic_sizes_strides()) return;  // a fake tensor while Dynamo traces: no memory
  const size_t have = impl->storage().nbytes();
  const size_t needed = at::detail::computeStorageNbytes(t.sizes(), t.strides(), t.dtype().itemsize(),
                                                         static_cast<size_t>(t.storage_offset()));
  if (needed <= have) return;
  TORCH_CHECK(false, "illegal memory access on ", t.device(), ": a tensor of size ", t.sizes(), " (strides ",
              t.strides(), ", storage offset ", t.storage_offset(), ", ", t.dtype().name(), ") needs ", needed,
              " bytes of storage, but its storage holds ", have,
              " bytes (freed or shrunk, e.g. by untyped_storage().resize_(0)); a device reports this as an "
              "illegal memory access");
}

at::Tensor CallStorages::host(const at::Tensor& t) {
  if (!t.defined() || !t.is_privateuseone()) return t;
  check_in_storage(t);
  c10::StorageImpl* dev = t.storage().unsafeGetStorageImpl();
  for (const auto& e : entries) {
    if (e.device.unsafeGetStorageImpl() == dev) {
      return tensor_on(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(e.host)), t,
                       c10::DispatchKeySet(c10::DispatchKey::CPU), false);
    }
  }
  c10::Storage hs = host_storage(t.storage());
  entries.push_back(Entry{hs.unsafeGetStorageImpl(), t.storage(), t.key_set()});
  return tensor_on(std::move(hs), t, c10::DispatchKeySet(c10::DispatchKey::CPU), false);
}

at::Tensor CallStorages::device(const at::Tensor& h) {
  if (!h.defined() || !h.device().is_cpu()) return h;
  TORCH_CHECK_NOT_IMPLEMENTED(
      !h.is_quantized(), "Could not run a quantized operator variant on the 'neuron' backend: quantized "
      "tensors are not supported on Neuron (TorchNeuron supported operators: class N)");
  TORCH_CHECK(h.layout() == c10::kStrided, "the simulated neuron device holds strided tensors only, got ",
              h.layout());
  c10::StorageImpl* hs = h.storage().unsafeGetStorageImpl();
  for (const auto& e : entries) {
    if (e.host == hs) return tensor_on(e.device, h, e.keys, true);
  }
  c10::Storage ds = device_storage(h.storage(), index);
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  at::Tensor out = tensor_on(ds, h, keys, false);
  entries.push_back(Entry{hs, std::move(ds), out.key_set()});
  return out;
}

void CallStorages::write_back(const at::Tensor& target, const at::Tensor& host) {
  c10::TensorImpl* impl = target.unsafeGetTensorImpl();
  c10::StorageImpl* dev = impl->storage().unsafeGetStorageImpl();
  c10::StorageImpl* now = host.storage().unsafeGetStorageImpl();
  const Entry* mine = nullptr;
  for (const auto& e : entries) {
    if (e.device.unsafeGetStorageImpl() == dev) mine = &e;
  }
  if (mine != nullptr && mine->host == now) {
    if (now->data_ptr().get() != dev->data_ptr().get() || now->nbytes() != dev->nbytes()) {
      // the kernel resized the alias: the device storage takes over the new bytes
      c10::Storage moved = wrap_storage(host.storage(), &release_host_storage, c10::Device(kNeuron, index), device_allocator());
      dev->set_data_ptr_noswap(std::move(moved.unsafeGetStorageImpl()->mutable_data_ptr()));
      dev->set_nbytes(now->nbytes());
    }
  } else {
    impl->set_storage_keep_dtype(device(host).storage());
  }
  if (target.sizes() != host.sizes() || target.strides() != host.strides() ||
      target.storage_offset() != host.storage_offset()) {
    impl->set_sizes_and_strides(host.sizes(), host.strides(), host.storage_offset());
  }
}

at::Tensor host_view(const at::Tensor& self) {
  if (!self.is_privateuseone()) return self;
  CallStorages storages;
  return storages.host(self);
}

}  // namespace neuron_sim
