"""NM819-NM830: rule records and TODO texts for cluster launchers and Optimum-era compile plumbing.

SLURM batch scripts and Kubernetes manifests carry GPU requests (`#SBATCH --gres=gpu:8`,
`nvidia.com/gpu: 8`), GPU node choices and NCCL settings around the same torchrun line a local
launcher has; Optimum Neuron launchers carry environment variables for a compile pass and a
compile cache that native TorchNeuron does not have. The shell rules live in
`migrate.configs.cluster_shell`, the manifest rules in `migrate.configs.k8s_rules`; the facts
they rest on are cited from the AWS Neuron documentation (links in each rationale).
"""

from __future__ import annotations

from migrate.configs.catalog import _todo
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
    Rule(
        id="NM819",
        name="slurm-gpu-request",
        summary="SLURM: `#SBATCH --gres=gpu:N` / `--gpus*=N` lines are disabled (`##SBATCH`), with a TODO.",
        rationale="SLURM counts GPUs as generic resources; Trainium nodes are normally allocated whole (`--exclusive`) "
        "and a GPU request would keep the job pending forever. `##SBATCH` is a comment to sbatch, so the line "
        "stays visible in review. A SLURM script is recognised by its `#SBATCH` lines, whatever its extension.",
        before=_SLURM + "#SBATCH --gres=gpu:8\nsrun hostname\n",
        after=_SLURM + _todo("NM819", TODO_TEXT["NM819"]) + "##SBATCH --gres=gpu:8\nsrun hostname\n",
        safety="unsafe",
        safety_reason="the job no longer requests GPUs; which nodes it gets depends on the partition you name",
        language="shell",
    ),
    Rule(
        id="NM820",
        name="slurm-gpu-placement",
        summary="TODO: GPU-specific `#SBATCH` lines (`--constraint=a100`, `--partition=gpu`, `--gpu-bind`, `--mem-per-gpu`).",
        rationale="Partition and feature names are site-specific: the tool cannot know what a cluster calls its "
        "Trainium nodes, so it never guesses; the line stays as it is until a person names them.",
        before=_SLURM + "#SBATCH --partition=gpu\nsrun hostname\n",
        after=_SLURM
        + _todo("NM820", TODO_TEXT["NM820"].format(line="--partition=gpu"))
        + "#SBATCH --partition=gpu\nsrun hostname\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM821",
        name="processes-per-node",
        summary="TODO: `--nproc_per_node` of a cluster launch (SLURM, Kubernetes) counted GPUs.",
        rationale="torchrun starts one process per accelerator: on Neuron, per logical NeuronCore. Trainium2 has 8 "
        "physical NeuronCores per device and the default LNC=2 groups them in pairs (" + LNC_DOC + "), so "
        "the count depends on the instance type and `NEURON_LOGICAL_NC_CONFIG`, which the script does not "
        "show; `gpu`/`auto` count CUDA devices. Local launchers keep NM803's core mapping instead.",
        before=_SLURM + "srun torchrun --nproc_per_node=8 train.py\n",
        after=_SLURM
        + _todo("NM821", TODO_TEXT["NM821"].format(value="8"))
        + "srun torchrun --nproc_per_node=8 train.py\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM822",
        name="nccl-env",
        summary="TODO: `NCCL_*` environment settings (shell exports, Kubernetes `env`).",
        rationale="NCCL is NVIDIA's collective library; the `neuron` process group runs Neuron's collectives, so "
        "`NCCL_DEBUG`, `NCCL_SOCKET_IFNAME` or `NCCL_IB_*` configure nothing. They are harmless, so they "
        "stay until a person deletes them.",
        before="export NCCL_DEBUG=INFO\ntorchrun train.py\n",
        after=_todo("NM822", TODO_TEXT["NM822"].format(names="NCCL_DEBUG"))
        + "export NCCL_DEBUG=INFO\ntorchrun train.py\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM823",
        name="neuron-cc-flags",
        summary="`NEURON_CC_FLAGS`: each flag is reported; `--cache_dir` moves to `TORCH_NEURONX_NEFF_CACHE_DIR`.",
        rationale="Under torch_xla, `NEURON_CC_FLAGS` mixed compiler options with options of the compile cache "
        "(`--cache_dir`, `--retry_failed_compilation`). TorchNeuron passes the variable to neuronx-cc and "
        "keeps its NEFF cache in `TORCH_NEURONX_NEFF_CACHE_DIR` (" + CACHE_DOC + "), so the cache directory "
        "moves there and the retry flag goes; compiler options stay, each noted for review.",
        before='export NEURON_CC_FLAGS="--model-type transformer --cache_dir=/fsx/cache"\n',
        after='export NEURON_CC_FLAGS="--model-type transformer" TORCH_NEURONX_NEFF_CACHE_DIR=/fsx/cache\n',
        safety="unsafe",
        safety_reason="--retry_failed_compilation is dropped: a failed compile is no longer retried",
        language="shell",
    ),
    Rule(
        id="NM824",
        name="compile-cache-env",
        summary="`NEURON_COMPILE_CACHE_URL=<dir>` -> `TORCH_NEURONX_NEFF_CACHE_DIR`; an S3 URL or `CUSTOM_CACHE_REPO` "
        "gets a TODO.",
        rationale="Optimum Neuron synchronised its compile cache with a local directory, an S3 bucket or a Hub "
        "repository. TorchNeuron's NEFF cache is a directory (" + CACHE_DOC + "): a local path keeps its "
        "meaning under the new name; S3 and Hub caches have no counterpart.",
        before="export NEURON_COMPILE_CACHE_URL=/fsx/neuron_cache\n",
        after="export TORCH_NEURONX_NEFF_CACHE_DIR=/fsx/neuron_cache\n",
        safety="safe",
        language="shell",
    ),
    Rule(
        id="NM825",
        name="graph-extraction-env",
        summary="TODO: `NEURON_PARALLEL_COMPILE` settings and branches on `NEURON_EXTRACT_GRAPHS_ONLY`.",
        rationale="`neuron_parallel_compile` ran the script once with these set, to extract and precompile graphs "
        "(NM812). Native TorchNeuron compiles on first run: the variables are never set, so a branch on "
        "them always takes its normal side. Deleting the branch is a person's call.",
        before='if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then MAX_STEPS=10; fi\n',
        after=_todo("NM825", TODO_TEXT["NM825"].format(name="NEURON_EXTRACT_GRAPHS_ONLY"))
        + 'if [ "$NEURON_EXTRACT_GRAPHS_ONLY" = "1" ]; then MAX_STEPS=10; fi\n',
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM826",
        name="xla-bf16-shell",
        summary="TODO: shell `XLA_USE_BF16` / `XLA_DOWNCAST_BF16` settings.",
        rationale="As NM609/NM920 in Python: torch_xla cast every float tensor to bf16 when these were set; native "
        "TorchNeuron ignores them, so the run is fp32 unless the model is loaded in bf16 or `--bf16` is passed.",
        before="export XLA_USE_BF16=1\n",
        after=_todo("NM826", TODO_TEXT["NM826"].format(name="XLA_USE_BF16")) + "export XLA_USE_BF16=1\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
    Rule(
        id="NM827",
        name="optimum-cli-neuron",
        summary="TODO: `optimum-cli neuron consolidate` and `optimum-cli neuron cache ...`.",
        rationale="Consolidation merged Optimum's per-rank tensor-parallel shards; transformers' `save_pretrained` "
        "gathers the shards of a model loaded with `DistributedConfig` into one checkpoint. The Hub compile "
        "cache commands have no TorchNeuron counterpart (" + CACHE_DOC + ").",
        before="optimum-cli neuron consolidate out/ out/consolidated\n",
        after=_todo("NM827", TODO_TEXT["NM827"].format(command="consolidate", advice=CLI_ADVICE["consolidate"]))
        + "optimum-cli neuron consolidate out/ out/consolidated\n",
        safety="safe",
        todo=True,
        language="shell",
    ),
)
