"""``neuroncompat simulate``: dry-run a script on the simulated device and count Neuron compilations.

On Trainium every distinct graph is a Neuron compilation (about a minute each, per the TRL guide),
and in eager mode every new input shape compiles the forward's ops again. Shape churn found here
costs nothing; found on a trn2 it costs compile time on every run.

- :mod:`~neuroncompat.simulate.launch` runs the user's ``python``/``torchrun``/``accelerate launch``
  command through the shim with the simulator on in every process;
- :mod:`~neuroncompat.simulate.record` records, in each process, the compiled graphs, the eager
  forward shapes and the findings (graph breaks from :mod:`~neuroncompat.simulate.graph_breaks`,
  data-dependent-shape and CPU-fallback ops from :mod:`~neuroncompat.simulate.op_findings`, with
  TorchNeuron's table in :mod:`~neuroncompat.simulate.op_support`; diffusers pipeline calls from
  :mod:`~neuroncompat.simulate.pipeline_calls`), and writes them at exit;
- :mod:`~neuroncompat.simulate.report` reads the records back into the per-rank report (text or
  JSON; :mod:`~neuroncompat.simulate.markdown` and :mod:`~neuroncompat.simulate.github` for CI),
  with :mod:`~neuroncompat.simulate.advice` choosing the fix for a location that churns,
  :mod:`~neuroncompat.simulate.pipeline_report` naming the cause of each pipeline call's recompiles, and
  ``--strict`` judging it; :mod:`~neuroncompat.simulate.settings` reads ``[tool.neuroncompat.simulate]``;
- :mod:`~neuroncompat.simulate.scenarios` holds the TRL guide's scenarios as runnable scripts.
"""

# Where each simulated process writes its record; set by ``neuroncompat simulate`` for its child.
RECORD_ENV = "NEURONCOMPAT_SIMULATE_RECORD"
