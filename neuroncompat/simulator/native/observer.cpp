// Observer: what `neuroncompat simulate` (and `--cpu-fallback-op`) learns from the device while a
// script runs. It watches some ops (data-dependent shapes, ops that fall back to the CPU on
// Neuron) and the dtypes TorchNeuron treats specially (complex, float64), and reports each with
// the events of neuron_device.h. A watched op that reaches the backend is reported by the
// fallback; a composite op (layer_norm, matmul, dropout: CompositeImplicitAutograd) reaches no
// backend, since it runs as the ops it decomposes into, so while watched it gets a kernel here
// that reports it. torch_openreg has no counterpart (a simulator's own diagnostic).

#include "fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace neuron_sim {
namespace {

using ObserverFn = void (*)(const char* op, int events);
std::atomic<ObserverFn> g_observer{nullptr};
std::atomic<uint64_t> g_watch_generation{1};
std::mutex g_watch_mutex;
std::unordered_set<std::string> g_watched;  // "aten::nonzero" or "aten::index.Tensor"

// A watched composite op's kernel at AutogradPrivateUse1: it reports the op and then runs its
// decomposition, as the composite kernel would: below autograd, whose inner ops dispatch afresh,
// so they record their own gradients.
void report_composite(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  const OpInfo& info = op_info(op);
  if (info.watched) notify(info.name, 1);
  op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
}

void watch_composites(const std::unordered_set<std::string>& names) {
  static std::unique_ptr<torch::Library> library;
  library.reset();  // drops the kernels of the previous watch
  if (names.empty()) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutogradPrivateUse1,
                                             __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    if (names.count(name.name) == 0 && names.count(full) == 0) continue;
    auto handle = dispatcher.findOp(name);
    if (!handle.has_value() || !handle->hasSchema() ||
        !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1) ||
        handle->hasKernelForDispatchKey(c10::DispatchKey::AutogradPrivateUse1))
      continue;
    library->impl(full.substr(6).c_str(), torch::CppFunction::makeFromBoxedFunction<&report_composite>());
  }
}

}  // namespace

bool observing() { return g_observer.load() != nullptr; }

void notify(const std::string& op, int events) {
  ObserverFn fn = g_observer.load();
  if (fn != nullptr && events != 0) fn(op.c_str(), events);
}

int dtype_events(c10::ScalarType dtype) {
  if (c10::isComplexType(dtype)) return 4;
  if (dtype == c10::kDouble) return 8;
  return 0;
}

bool watched(const std::string& base, const std::string& name) {
  std::lock_guard<std::mutex> lock(g_watch_mutex);
  return g_watched.count(base) > 0 || g_watched.count(name) > 0;
}

uint64_t watch_generation() { return g_watch_generation.load(); }

void bump_watch_generation() { g_watch_generation.fetch_add(1); }

std::unordered_set<std::string> split_names(const char* names) {
  std::unordered_set<std::string> out;
  const std::string all = names != nullptr ? names : "";
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find(',', start);
    if (end == std::string::npos) end = all.size();
    if (end > start) out.insert(all.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace neuron_sim

// The op observer: `fn(op, events)` for the ops named in `watched` (comma-separated, with or
// without the overload) and, while fn is set, for complex and float64 results. nullptr removes it.
extern "C" void neuroncompat_set_observer(neuron_sim::ObserverFn fn, const char* watched) {
  using namespace neuron_sim;
  std::unordered_set<std::string> names = split_names(watched);
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    g_watched = names;
  }
  std::unordered_set<std::string> aten;
  for (const std::string& n : names) {
    if (n.rfind("aten::", 0) == 0) aten.insert(n);
  }
  watch_composites(fn != nullptr ? aten : std::unordered_set<std::string>{});
  g_observer.store(fn);
  g_watch_generation.fetch_add(1);
}
