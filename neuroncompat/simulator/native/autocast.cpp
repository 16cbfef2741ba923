// Autocast (torch_openreg: amp/autocast_mode): `torch.autocast("neuron")`. Mixed-precision
// training code picks its casts by the autocast policy of the device it runs on, so the device
// needs one, whole: the lower-precision, float32 and promote lists. Ops with no autocast kernel
// fall through to their device kernel unchanged.
//
// The policy is CUDA's, from the op lists torch's own CUDA registration expands
// (aten/src/ATen/autocast_mode.cpp registers AutocastCUDA from these macros of
// ATen/autocast_mode.h, there "to make sure other backends can reuse the policy op list"), so the
// lists are those of the torch this file is built against, never copied by hand: ops cast down to
// the autocast dtype (matmuls, convolutions, SDPA), ops run in float32 (layer_norm, losses,
// pointwise transcendentals), ops given dtype=float32 (softmax, sum, cumsum), ops run in the widest
// input type (addcmul, index_put), and binary_cross_entropy refused. TorchNeuron's own lists are
// not published (docs/simulator.md: unknown on trn2); CUDA's is the likeliest for a CUDA-like
// backend, and under bf16 it reproduces TRL #7664. tests/test_simulator_autocast.py checks at run
// time that every op with an AutocastCUDA kernel has one here.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

// The lists' signatures name Tensor, Scalar, ScalarType and IntArrayRef unqualified, as inside at::.
namespace neuron_autocast {
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                              int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER_PRECISION_FP)
  KERNEL_PRIVATEUSEONE(cudnn_convolution, lower_precision_fp)  // CUDA's registration adds these two
  KERNEL_PRIVATEUSEONE(cudnn_convolution_transpose, lower_precision_fp)
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NEURON_FP32)
#define NEURON_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace neuron_autocast

