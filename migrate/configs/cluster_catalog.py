"""NM819-NM830: rule records and TODO texts for cluster launchers and Optimum-era compile plumbing.

SLURM batch scripts and Kubernetes manifests carry GPU requests (`#SBATCH --gres=gpu:8`,
`nvidia.com/gpu: 8`), GPU node choices and NCCL settings around the same torchrun line a local
launcher has; Optimum Neuron launchers carry environment variables for a compile pass and a
compile cache that native TorchNeuron does not have. The shell rules live in
`migrate.configs.cluster_shell`, the manifest rules in `migrate.configs.k8s_rules`; the facts
they rest on are cited from the AWS Neuron documentation (links in each rationale).
"""

from __future__ import annotations

from migrate.configs.catalog import _rule, _todo
from migrate.registry import Rule

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/"
LNC_DOC = _DOCS + "general/arch/neuron-features/logical-neuroncore-config.html"
CACHE_DOC = _DOCS + "compiler/about-compiler-artifacts.html"
PLUGIN_DOC = _DOCS + "containers/tutorials/k8s-neuron-device-plugin.html"
NEFF_CACHE_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"

CORE_COUNTS = (
    "one process per logical NeuronCore of the node, not per GPU: a trn2.48xlarge has 16 Trainium2 "
    "devices of 8 physical cores, i.e. 64 logical cores under the default LNC=2 "
    "(NEURON_LOGICAL_NC_CONFIG=2) or 128 under LNC=1; neuron-ls prints the count"
)

TODO_TEXT = {
    "NM819": "the GPU request is disabled (##SBATCH): ask for whole Trainium nodes instead (#SBATCH --exclusive on a "
    "partition of trn2 nodes); the Neuron runtime uses every NeuronCore of the node",
    "NM820": "{line}: GPU-specific; name the partition or constraint of your Trainium (trn2) nodes instead",
    "NM821": "--nproc_per_node {value} counted GPUs: start " + CORE_COUNTS,
    "NM822": "{names}: NCCL settings have no effect on Neuron (the neuron process group does not use NCCL); "
    "delete them, and tune EFA through FI_* variables if needed",
    "NM823": "NEURON_CC_FLAGS is computed at run time: check each flag; a --cache_dir moves to "
    + NEFF_CACHE_ENV
    + ", and --retry_failed_compilation has no native counterpart",
    "NM824": "{name}={value}: Optimum Neuron's compile cache is gone; TorchNeuron keeps compiled NEFFs in a "
    "directory (" + NEFF_CACHE_ENV + "), so share it through a shared file system instead of {what}",
    "NM825": "{name}: the graph-extraction pass (neuron_parallel_compile) no longer exists: native TorchNeuron "
    "compiles on first run, so this setting or branch does nothing; delete it",
    "NM826": "{name}: torch_xla's bf16 switch has no effect natively: load or cast the model in bf16 "
    "(dtype=torch.bfloat16) or pass --bf16 to a Trainer script",
    "NM827": "optimum-cli neuron {command} is Optimum Neuron only: {advice}",
}

CLI_ADVICE = {
    "consolidate": "transformers' save_pretrained writes one unified checkpoint from a tensor-parallel model "
    "(it gathers the shards), so there is nothing to consolidate; load the output directory directly",
    "cache": "TorchNeuron's compile cache is a local directory (" + NEFF_CACHE_ENV + "), not a Hub repository; "
    "share it through a shared file system",
}

_SLURM = "#!/bin/bash\n#SBATCH --nodes=2\n"

RULES: tuple[Rule, ...] = (
    _rule(
        "NM819",
        "slurm-gpu-request",
        "shell",
        "SLURM: `#SBATCH --gres=gpu:N` / `--gpus*=N` lines are disabled (`##SBATCH`), with a TODO.",
        "SLURM counts GPUs as generic resources; Trainium nodes are normally allocated whole (`--exclusive`) "
        "and a GPU request would keep the job pending forever. `##SBATCH` is a comment to sbatch, so the line "
        "stays visible in review. A SLURM script is recognised by its `#SBATCH` lines, whatever its extension.",
        _SLURM + "#SBATCH --gres=gpu:8\nsrun hostname\n",
        _SLURM + _todo("NM819", TODO_TEXT["NM819"]) + "##SBATCH --gres=gpu:8\nsrun hostname\n",
        safety_reason="the job no longer requests GPUs; which nodes it gets depends on the partition you name",
    ),
    _rule(
        "NM820",
        "slurm-gpu-placement",
        "shell",
        "TODO: GPU-specific `#SBATCH` lines (`--constraint=a100`, `--partition=gpu`, `--gpu-bind`, `--mem-per-gpu`).",
        "Partition and feature names are site-specific: the tool cannot know what a cluster calls its "
        "Trainium nodes, so it never guesses; the line stays as it is until a person names them.",
        _SLURM + "#SBATCH --partition=gpu\nsrun hostname\n",
        _SLURM
        + _todo("NM820", TODO_TEXT["NM820"].format(line="--partition=gpu"))
        + "#SBATCH --partition=gpu\nsrun hostname\n",
        todo=True,
    ),
    _rule(
        "NM821",
        "processes-per-node",
        "shell",
        "TODO: `--nproc_per_node` of a cluster launch (SLURM, Kubernetes) counted GPUs.",
        "torchrun starts one process per accelerator: on Neuron, per logical NeuronCore. Trainium2 has 8 "
        "physical NeuronCores per device and the default LNC=2 groups them in pairs (" + LNC_DOC + "), so "
        "the count depends on the instance type and `NEURON_LOGICAL_NC_CONFIG`, which the script does not "
        "show; `gpu`/`auto` count CUDA devices. Local launchers keep NM803's core mapping instead.",
        _SLURM + "srun torchrun --nproc_per_node=8 train.py\n",
        _SLURM + _todo("NM821", TODO_TEXT["NM821"].format(value="8")) + "srun torchrun --nproc_per_node=8 train.py\n",
        todo=True,
    ),
    _rule(
        "NM822",
        "nccl-env",
        "shell",
        "TODO: `NCCL_*` environment settings (shell exports, Kubernetes `env`).",
        "NCCL is NVIDIA's collective library; the `neuron` process group runs Neuron's collectives, so "
        "`NCCL_DEBUG`, `NCCL_SOCKET_IFNAME` or `NCCL_IB_*` configure nothing. They are harmless, so they "
        "stay until a person deletes them.",
        "export NCCL_DEBUG=INFO\ntorchrun train.py\n",
        _todo("NM822", TODO_TEXT["NM822"].format(names="NCCL_DEBUG")) + "export NCCL_DEBUG=INFO\ntorchrun train.py\n",
        todo=True,
    ),
    _rule(
        "NM823",
        "neuron-cc-flags",
        "shell",
        "`NEURON_CC_FLAGS`: each flag is reported; `--cache_dir` moves to `TORCH_NEURONX_NEFF_CACHE_DIR`.",
        "Under torch_xla, `NEURON_CC_FLAGS` mixed compiler options with options of the compile cache "
        "(`--cache_dir`, `--retry_failed_compilation`). TorchNeuron passes the variable to neuronx-cc and "
        "keeps its NEFF cache in `TORCH_NEURONX_NEFF_CACHE_DIR` (" + CACHE_DOC + "), so the cache directory "
        "moves there and the retry flag goes; compiler options stay, each noted for review.",
        'export NEURON_CC_FLAGS="--model-type transformer --cache_dir=/fsx/cache"\n',
        'export NEURON_CC_FLAGS="--model-type transformer" TORCH_NEURONX_NEFF_CACHE_DIR=/fsx/cache\n',
        safety_reason="--retry_failed_compilation is dropped: a failed compile is no longer retried",
    ),
    _rule(
        "NM824",
        "compile-cache-env",
        "shell",
        "`NEURON_COMPILE_CACHE_URL=<dir>` -> `TORCH_NEURONX_NEFF_CACHE_DIR`; an S3 URL or `CUSTOM_CACHE_REPO` "
        "gets a TODO.",
        "Optimum Neuron synchronised its compile cache with a local directory, an S3 bucket or a Hub "
        "repository. TorchNeuron's NEFF cache is a directory (" + CACHE_DOC + "): a local path keeps its "
        "meaning under the new name; S3 and Hub caches have no counterpart.",
        "export NEURON_COMPILE_CACHE_URL=/fsx/neuron_cache\n",
        "export TORCH_NEURONX_NEFF_CACHE_DIR=/fsx/neuron_cache\n",
    ),
    _rule(
        "NM825",
        "graph-extraction-env",
        "shell",
        "TODO: `NEURON_PARALLEL_COMPILE` settings and branches on `NEURON_EXTRACT_GRAPHS_ONLY`.",
        "`neuron_parallel_compile` ran the script once with these set, to extract and precompile graphs "
        "(NM812). Native TorchNeuron compiles on first run: the variables are never set, so a branch on "
        "them always takes its normal side. Deleting the branch is a person's call.",
        'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then MAX_STEPS=10; fi\n',
        _todo("NM825", TODO_TEXT["NM825"].format(name="NEURON_EXTRACT_GRAPHS_ONLY"))
        + 'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then MAX_STEPS=10; fi\n',
        todo=True,
    ),
    _rule(
        "NM826",
        "xla-bf16-shell",
        "shell",
        "TODO: shell `XLA_USE_BF16` / `XLA_DOWNCAST_BF16` settings.",
        "As NM609/NM920 in Python: torch_xla cast every float tensor to bf16 when these were set; native "
        "TorchNeuron ignores them, so the run is fp32 unless the model is loaded in bf16 or `--bf16` is passed.",
        "export XLA_USE_BF16=1\n",
        _todo("NM826", TODO_TEXT["NM826"].format(name="XLA_USE_BF16")) + "export XLA_USE_BF16=1\n",
        todo=True,
    ),
    _rule(
        "NM827",
        "optimum-cli-neuron",
        "shell",
        "TODO: `optimum-cli neuron consolidate` and `optimum-cli neuron cache ...`.",
        "Consolidation merged Optimum's per-rank tensor-parallel shards; transformers' `save_pretrained` "
        "gathers the shards of a model loaded with `DistributedConfig` into one checkpoint. The Hub compile "
        "cache commands have no TorchNeuron counterpart (" + CACHE_DOC + ").",
        "optimum-cli neuron consolidate out/ out/consolidated\n",
        _todo("NM827", TODO_TEXT["NM827"].format(command="consolidate", advice=CLI_ADVICE["consolidate"]))
        + "optimum-cli neuron consolidate out/ out/consolidated\n",
        todo=True,
    ),
)
