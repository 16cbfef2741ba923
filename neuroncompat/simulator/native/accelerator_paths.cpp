// Accelerator-only paths: ops where ATen, seeing a PrivateUse1 tensor, takes a path only an
// accelerator's own kernels can serve, and a backend without them fails or computes differently.
// Each is answered here the CPU's way, so these models run on the device with the CPU's numbers:
// scaled_dot_product_attention asks the backend which fused kernel to use (the CPU's choice),
// convolutions go to the `_overrideable` pair (the CPU's whole convolution, through the
// fallback), and LSTM/GRU take the fused-cell path (CUDA's math as ATen ops). torch_openreg keeps
// its kernels beyond the minimal set in aten/OpenRegExtra.

#include "fallback.h"
#include "host_alias.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/TensorOperators.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

namespace neuron_sim {
namespace {

// SDPA asks each backend which fused kernel to use; the CPU's answer, so scaled_dot_product_attention
// runs the same CPU kernel (flash attention for CPU, or math) as on the CPU.
int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                   const std::optional<at::Tensor>& mask, double dropout, bool causal, std::optional<double> scale,
                   bool gqa) {
  // Only metadata decides; under FakeTensorMode (Dynamo tracing) the host aliases must reach
  // the CPU kernel directly rather than the mode.
  c10::impl::ExcludeDispatchKeyGuard no_python(
      c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
  // The aliases carry each tensor's requires_grad: the CPU's choice depends on it (a mask that requires
  // grad rules out flash attention, whose backward has no gradient for the mask: doge, inkling).
  CallStorages storages;
  auto host = [&storages](const at::Tensor& t) {
    at::Tensor alias = storages.host(t);
    if (t.requires_grad()) alias.requires_grad_(true);
    return alias;
  };
  std::optional<at::Tensor> host_mask;
  if (mask.has_value()) host_mask = host(*mask);
  return at::_fused_sdp_choice(host(query), host(key), host(value), host_mask, dropout, causal, scale, gqa);
}

// The fused RNN cells. ATen's LSTM and GRU take the fused-cell path for every accelerator
// (RNN.cpp: `input.is_cuda() || input.is_xpu() || input.is_privateuseone()`), and only CUDA has
// kernels for it: without these, nn.LSTM and nn.GRU fail on the device. The math is CUDA's
// (aten/src/ATen/native/cuda/RNN.cu): gates summed with the biases, then the activations, in
// float for reduced-precision inputs as CUDA's accscalar_t does; the workspace holds the
// activated gates the backward reads. Written as ATen ops on the device tensors, so each runs the
// CPU kernel through the fallback; values differ from the CPU's unfused cell in the last bits
// (the sums are grouped differently), as they do on CUDA.
at::Tensor opt_or_undefined(const std::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); }

at::Tensor compute_dtype(const at::Tensor& t) {
  return at::isReducedFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t;
}

at::Tensor summed_gates(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                        const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = compute_dtype(input_gates) + compute_dtype(hidden_gates);
  const at::Tensor ib = opt_or_undefined(input_bias), hb = opt_or_undefined(hidden_bias);
  if (ib.defined()) gates = gates + compute_dtype(ib);
  if (hb.defined()) gates = gates + compute_dtype(hb);
  return gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(const at::Tensor& input_gates,
                                                               const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                               const std::optional<at::Tensor>& input_bias,
                                                               const std::optional<at::Tensor>& hidden_bias) {
  const auto dtype = input_gates.scalar_type();
  auto chunks = summed_gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
  at::Tensor ig = chunks[0].sigmoid(), fg = chunks[1].sigmoid(), cg = chunks[2].tanh(), og = chunks[3].sigmoid();
  at::Tensor cy = fg * compute_dtype(cx) + ig * cg;
  at::Tensor hy = og * cy.tanh();
  at::Tensor workspace = at::cat({ig, fg, cg, og}, 1).to(dtype);
  return {hy.to(dtype), cy.to(dtype), workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(const std::optional<at::Tensor>& grad_hy,
                                                                        const std::optional<at::Tensor>& grad_cy,
                                                                        const at::Tensor& cx, const at::Tensor& cy,
                                                                        const at::Tensor& workspace, bool has_bias) {
  const auto dtype = workspace.scalar_type();
  auto gates = compute_dtype(workspace).chunk(4, 1);
  const at::Tensor &ig = gates[0], &fg = gates[1], &cg = gates[2], &og = gates[3];
  const at::Tensor go = opt_or_undefined(grad_hy), gc = opt_or_undefined(grad_cy);
  at::Tensor tanh_cy = compute_dtype(cy).tanh();
  at::Tensor gcx = go.defined() ? compute_dtype(go) * og * (1 - tanh_cy * tanh_cy) : at::zeros_like(tanh_cy);
  if (gc.defined()) gcx = gcx + compute_dtype(gc);
  at::Tensor gog = go.defined() ? compute_dtype(go) * tanh_cy : at::zeros_like(tanh_cy);
  at::Tensor gig = gcx * cg * (1 - ig) * ig;
  at::Tensor gfg = gcx * compute_dtype(cx) * (1 - fg) * fg;
  at::Tensor gcg = gcx * ig * (1 - cg * cg);
  gog = gog * (1 - og) * og;
  at::Tensor grad_gates = at::cat({gig, gfg, gcg, gog}, 1).to(dtype);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0, /*keepdim=*/false) : at::Tensor();
  return {grad_gates, (gcx * fg).to(dtype), grad_bias};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  const auto dtype = input_gates.scalar_type();
  at::Tensor ig_all = compute_dtype(input_gates), hg_all = compute_dtype(hidden_gates);
  const at::Tensor ib = opt_or_undefined(input_bias), hb = opt_or_undefined(hidden_bias);
  if (ib.defined()) ig_all = ig_all + compute_dtype(ib);
  if (hb.defined()) hg_all = hg_all + compute_dtype(hb);
  auto i = ig_all.chunk(3, 1);
  auto h = hg_all.chunk(3, 1);
  at::Tensor rg = (i[0] + h[0]).sigmoid(), zg = (i[1] + h[1]).sigmoid();
  at::Tensor ng = (i[2] + rg * h[2]).tanh();
  at::Tensor hx_c = compute_dtype(hx);
  at::Tensor hy = ng + zg * (hx_c - ng);
  at::Tensor workspace = at::cat({rg, zg, ng, hx_c, h[2]}, 1).to(dtype);
  return {hy.to(dtype), workspace};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  const auto dtype = workspace.scalar_type();
  auto w = compute_dtype(workspace).chunk(5, 1);
  const at::Tensor &rg = w[0], &zg = w[1], &ng = w[2], &hx = w[3], &hn = w[4];
  at::Tensor go = compute_dtype(grad_hy);
  at::Tensor gzg = go * (hx - ng) * (1 - zg) * zg;
  at::Tensor ghx = go * zg;
  at::Tensor gin = go * (1 - zg) * (1 - ng * ng);
  at::Tensor ghn = gin * rg;
  at::Tensor grg = gin * hn * (1 - rg) * rg;
  at::Tensor grad_input_gates = at::cat({grg, gzg, gin}, 1).to(dtype);
  at::Tensor grad_hidden_gates = at::cat({grg, gzg, ghn}, 1).to(dtype);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, ghx.to(dtype), grad_input_bias, grad_hidden_bias};
}

// Convolutions. ATen sends a backend without its own convolution kernels to the `_overrideable`
// pair (Convolution.cpp: ConvBackend::Overrideable for PrivateUse1), which has no kernel of its
// own. These run the CPU's whole convolution (its backend choice: mkldnn, slow_conv, depthwise)
// through the fallback, on the device tensors' memory, so values are the CPU's bit for bit.
c10::IValue int_list(c10::SymIntArrayRef values) { return c10::IValue(values.vec()); }

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                                    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                                    c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  torch::jit::Stack stack{input,          weight, bias, int_list(stride), int_list(padding), int_list(dilation),
                          transposed,     int_list(output_padding), c10::IValue(groups)};
  neuron_fallback(op, &stack);
  return stack.back().toTensor();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::SymIntArrayRef stride,
    c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
    c10::SymInt groups, std::array<bool, 3> output_mask) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution_backward", "");
  c10::IValue bias_sizes;  // None unless the bias gradient is wanted: then its length, out_channels
  if (output_mask[2]) {
    const c10::SymInt out_channels = transposed ? weight.sym_size(1) * groups : weight.sym_size(0);
    bias_sizes = c10::IValue(std::vector<c10::SymInt>{out_channels});
  }
  torch::jit::Stack stack{grad_output,
                          input,
                          weight,
                          bias_sizes,
                          int_list(stride),
                          int_list(padding),
                          int_list(dilation),
                          transposed,
                          int_list(output_padding),
                          c10::IValue(groups),
                          c10::IValue(c10::List<bool>({output_mask[0], output_mask[1], output_mask[2]}))};
  neuron_fallback(op, &stack);
  const size_t n = stack.size();
  auto tensor_or_undefined = [](const c10::IValue& v) { return v.isTensor() ? v.toTensor() : at::Tensor(); };
  return {tensor_or_undefined(stack[n - 3]), tensor_or_undefined(stack[n - 2]), tensor_or_undefined(stack[n - 1])};
}

}  // namespace
}  // namespace neuron_sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &::neuron_sim::sdp_choice)
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace neuron_sim;
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}
