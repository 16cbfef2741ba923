// The boxed fallback: every op without a kernel of its own here runs the op's CPU kernel on the
// device tensors' own memory (torch_openreg's kernels are its own; this is what makes the
// simulator a simulator: numerics are the CPU's bit for bit, at about the CPU's cost, and nothing
// is copied). It replaces each device tensor among the arguments (alone, in lists, in lists of
// optionals) by its host alias (host_alias.cpp) and each `device="neuron"` by the CPU, applies
// CUDA's device checks (device_checks.cpp) when a CPU tensor is among them, runs the CPU kernel
// with the core's pool as the CPU allocator (host_redirect.cpp), then turns the results back into
// device tensors (in-place and out= results are the caller's own tensors). A random op draws from
// the core's generator (generator.cpp); quantized operator variants are refused (TorchNeuron's
// supported-operators page, class N); watched ops are reported to the observer (observer.cpp).

#include "fallback.h"
#include "host_alias.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>

namespace neuron_sim {
namespace {

bool quantized_op(const std::string& name) {
  return name.rfind("quantized::", 0) == 0 || name.rfind("aten::quantize_per", 0) == 0 ||
         name.rfind("aten::_make_per_tensor_quantized", 0) == 0 ||
         name.rfind("aten::_make_per_channel_quantized", 0) == 0 || name.rfind("aten::q_", 0) == 0 ||
         name.rfind("aten::int_repr", 0) == 0;
}

OpInfo make_info(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  OpInfo info;
  const std::string& base = schema.name();
  info.name = schema.overload_name().empty() ? base : base + "." + schema.overload_name();
  info.random = op.hasTag(at::Tag::nondeterministic_seeded);
  info.refused = quantized_op(base);
  const auto& args = schema.arguments();
  const bool aten = base.rfind("aten::", 0) == 0;
  const std::string short_name = aten ? info.name.substr(6) : info.name;
  const std::string bare = base.substr(aten ? 6 : 0);
  info.method = "wrapper_PrivateUse1_" + (schema.overload_name().empty() ? "_" + bare : bare + "_" + schema.overload_name());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_out()) info.checked_args.push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].kwarg_only()) info.checked_args.push_back(static_cast<int>(i));
    const c10::TypePtr& type = args[i].real_type();
    if (args[i].name() == "indices" && type->kind() == c10::TypeKind::ListType &&
        type->containedType(0)->kind() == c10::TypeKind::OptionalType) {
      info.indices_arg = static_cast<int>(i);
    }
    if (args[i].name() == "values" && type->kind() == c10::TypeKind::TensorType) info.values_arg = static_cast<int>(i);
  }
  info.check = device_check_of(short_name, aten, info.indices_arg >= 0);
  for (size_t i = 0; i < args.size(); ++i) {
    info.arg_names.push_back(args[i].name());
    if (args[i].name() == "generator") info.generator_arg = static_cast<int>(i);
    const c10::AliasInfo* alias = args[i].alias_info();
    if (alias != nullptr && alias->isWrite()) info.write_args.push_back(static_cast<int>(i));
  }
  for (const auto& ret : schema.returns()) {
    int target = -1;
    const c10::AliasInfo* alias = ret.alias_info();
    if (alias != nullptr && alias->isWrite()) {
      for (size_t i = 0; i < args.size(); ++i) {
        const c10::AliasInfo* a = args[i].alias_info();
        if (a != nullptr && a->beforeSets() == alias->beforeSets()) {
          target = static_cast<int>(i);
          break;
        }
      }
    }
    info.write_returns.push_back(target);
  }
  info.watched = watched(base, info.name);
  info.mask_indexing = base == "aten::index" || base == "aten::_unsafe_index" || base == "aten::index_put_" ||
                       base == "aten::index_put" || base == "aten::_index_put_impl_" ||
                       base == "aten::_unsafe_index_put";
  info.generation = watch_generation();
  return info;
}

struct ArgScan {
  CallStorages* storages;
  const OpInfo* info;
  int index = -1;
  bool cpu_operand = false;  // a CPU tensor among the arguments: the op's device check decides
  bool mask = false;

  void see_device(int core) {
    if (index < 0) {
      index = core;
    } else if (core != index) {
      mixed_devices(info->name, index, "neuron:" + std::to_string(core));
    }
  }

  at::Tensor host(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.is_privateuseone()) {
      see_device(t.device().index());
      return storages->host(t);
    }
    if (t.device().is_cpu()) cpu_operand = true;
    return t;
  }

  c10::IValue map(const c10::IValue& v, bool indices) {
    if (v.isTensor()) return host(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      auto in = v.toTensorList();
      out.reserve(in.size());
      for (const at::Tensor& t : in) out.push_back(host(t));
      return out;
    }
    if (v.isList()) {
      auto in = v.toList();
      c10::impl::GenericList out(in.elementType());
      out.reserve(in.size());
      for (const c10::IValue& e : in) {
        if (e.isTensor()) {
          const at::Tensor& t = e.toTensor();
          if (indices && t.defined() && (t.scalar_type() == c10::kBool || t.scalar_type() == c10::kByte)) mask = true;
          out.push_back(host(t));
        } else {
          out.push_back(e);
        }
      }
      return out;
    }
    if (v.isDevice() && v.toDevice().type() == kNeuron) {
      const c10::Device d = v.toDevice();
      see_device(d.has_index() ? d.index() : current_index());
      return c10::Device(c10::kCPU);
    }
    return v;
  }
};

c10::IValue to_device(CallStorages& storages, const c10::IValue& v) {
  if (v.isTensor()) return storages.device(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    auto in = v.toTensorList();
    out.reserve(in.size());
    for (const at::Tensor& t : in) out.push_back(storages.device(t));
    return out;
  }
  return v;
}

int64_t numel_of(const c10::IValue& v) {
  if (v.isTensor()) return v.toTensor().defined() ? v.toTensor().numel() : 0;
  if (v.isTensorList()) {
    int64_t n = 0;
    for (const at::Tensor& t : v.toTensorList()) n += t.numel();
    return n;
  }
  return 0;
}

int tensor_events(const at::Tensor& t) { return t.defined() ? dtype_events(t.scalar_type()) : 0; }

int events_of(const c10::IValue& v) {
  if (v.isTensor()) return tensor_events(v.toTensor());
  if (v.isTensorList()) {
    int e = 0;
    for (const at::Tensor& t : v.toTensorList()) e |= tensor_events(t);
    return e;
  }
  return 0;
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, int core) {
  KernelCoreGuard kernel(core);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// A random op: draw from the core's generator (or the neuron generator passed), then advance it.
void run_seeded(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& info, size_t first_arg,
                int core) {
  at::Generator gen;
  c10::IValue* gen_arg = nullptr;
  if (info.generator_arg >= 0) {
    gen_arg = &(*stack)[first_arg + info.generator_arg];
    if (gen_arg->isGenerator()) gen = gen_arg->toGenerator();
  }
  if (gen.defined()) {
    TORCH_CHECK(gen.device().type() == kNeuron, "Expected a 'neuron' device type for generator but found '",
                c10::DeviceTypeName(gen.device().type(), true), "'");
  } else {
    gen = default_generator(static_cast<c10::DeviceIndex>(core));
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  const uint64_t offset = gen.get_offset();
  const uint64_t seed = mix(gen.current_seed(), offset);
  if (gen_arg != nullptr) {
    *gen_arg = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(seed));
    run_on_cpu(op, stack, core);
  } else {
    // An op with no generator argument (native_dropout) draws from the CPU default generator.
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    c10::intrusive_ptr<c10::TensorImpl> saved;
    {
      std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
      saved = cpu.get_state().getIntrusivePtr();
      cpu.set_current_seed(seed);
    }
    try {
      run_on_cpu(op, stack, core);
    } catch (...) {
      std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
      cpu.set_state(at::Tensor(saved));
      throw;
    }
    std::lock_guard<std::mutex> cpu_lock(cpu.mutex());
    cpu.set_state(at::Tensor(saved));
  }
  int64_t drawn = 0;
  const size_t returns = op.schema().returns().size();
  for (size_t i = stack->size() - returns; i < stack->size(); ++i) drawn += numel_of((*stack)[i]);
  gen.set_offset(offset + static_cast<uint64_t>((drawn + 3) / 4 * 4));
}

}  // namespace

const OpInfo& op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, OpInfo> cache;
  const c10::FunctionSchema* key = &op.schema();
  auto it = cache.find(key);
  if (it == cache.end() || it->second.generation != watch_generation()) {
    it = cache.insert_or_assign(key, make_info(op)).first;
  }
  return it->second;
}

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  TORCH_CHECK_NOT_IMPLEMENTED(
      !info.refused, "Could not run '", info.name,
      "' with arguments from the 'neuron' backend: quantized operator variants are not supported on Neuron "
      "(TorchNeuron supported operators: class N)");
  const size_t nargs = op.schema().arguments().size();
  const size_t first = stack->size() - nargs;
  c10::SmallVector<c10::IValue, 8> originals;
  originals.reserve(nargs);
  CallStorages storages;
  ArgScan scan{&storages, &info};
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& slot = (*stack)[first + i];
    originals.push_back(slot);
    slot = scan.map(slot, info.mask_indexing && i == 1);
  }
  const int core = scan.index >= 0 ? scan.index : current_index();
  if (scan.cpu_operand && scan.index >= 0) check_devices(info, originals, scan.index);
  storages.index = static_cast<c10::DeviceIndex>(core);
  if (info.watched) notify(info.name, 1 | (scan.mask ? 2 : 0));

  c10::SmallVector<c10::IValue, 4> written;  // the host aliases of written arguments
  for (int a : info.write_args) written.push_back((*stack)[first + a]);
  if (info.random) {
    run_seeded(op, stack, info, first, core);
  } else {
    run_on_cpu(op, stack, core);
  }

  for (size_t w = 0; w < info.write_args.size(); ++w) {
    const c10::IValue& target = originals[info.write_args[w]];
    const c10::IValue& host = written[w];
    if (target.isTensor() && host.isTensor() && target.toTensor().is_privateuseone()) {
      storages.write_back(target.toTensor(), host.toTensor());
    } else if (target.isTensorList() && host.isTensorList()) {
      auto targets = target.toTensorList();
      auto hosts = host.toTensorList();
      for (size_t i = 0; i < targets.size(); ++i) {
        const at::Tensor device_tensor = targets[i];
        if (device_tensor.is_privateuseone()) storages.write_back(device_tensor, hosts[i]);
      }
    }
  }
  const size_t returns = op.schema().returns().size();
  int events = 0;
  for (size_t r = 0; r < returns; ++r) {
    c10::IValue& slot = (*stack)[stack->size() - returns + r];
    const int target = info.write_returns[r];
    if (target >= 0) {
      slot = originals[target];
    } else {
      slot = to_device(storages, slot);
    }
    events |= events_of(slot);
  }
  if (events != 0 && observing()) notify(info.name, events);
}

// Ops with a CPU kernel and a CompositeExplicitAutograd(NonFunctional) one reach PrivateUse1
// through the composite kernel, not the fallback: native_layer_norm and native_group_norm then
// run ATen's reference math (math_native_layer_norm), whose values differ from the CPU's kernel
// in the last bits, and structured ops (add.Tensor, mul_, ...) run as empty + meta + the out=
// variant, three dispatches where one will do. Each gets the fallback registered for PrivateUse1
// explicitly, so it runs the CPU's own kernel. Views (a non-mutable aliased return) keep their
// composite kernels, as do ops the backend implements itself.
void route_cpu_kernels_to_fallback() {
  static torch::Library* library =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value() || !handle->hasSchema()) continue;
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1))
      continue;
    if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      continue;
    bool view = false;
    for (const c10::Argument& r : handle->schema().returns()) {
      if (r.alias_info() != nullptr && !r.alias_info()->isWrite()) view = true;
    }
    if (view) continue;
    const std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
  }
}

}  // namespace neuron_sim

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_sim::neuron_fallback>());
}
