"""NM828-NM829: rule records and TODO texts for Kubernetes manifests (applied by `k8s_rules`).

The resource names are the Neuron device plugin's (PLUGIN_DOC): `aws.amazon.com/neuroncore`
allocates single NeuronCores, `aws.amazon.com/neuron` whole devices with all their cores.
"""

from __future__ import annotations

from migrate.configs.catalog import _todo
from migrate.configs.cluster_catalog import LNC_DOC, PLUGIN_DOC
from migrate.registry import Rule

NEURONCORE, NEURON_DEVICE = "aws.amazon.com/neuroncore", "aws.amazon.com/neuron"
NEURON_IMAGE = (
    "a Neuron Deep Learning Container (public.ecr.aws/neuron/pytorch-training-neuronx) or your image built on it"
)

TODO_TEXT = {
    "resource": "nvidia.com/gpu: {count} became " + NEURONCORE + ": {count}, one NeuronCore per former GPU (one "
    "process each); request whole devices with " + NEURON_DEVICE + " instead (a Trainium2 device has 8 "
    "physical NeuronCores, 4 logical under the default LNC=2) and keep --nproc_per_node equal to the "
    "cores granted",
    "both": "nvidia.com/gpu is requested next to Neuron resources: remove it, Trainium nodes have no GPUs",
    "image": "{image} is a CUDA image: use " + NEURON_IMAGE,
    "instance": "{value} is a GPU instance type: select Trainium nodes instead (e.g. trn2.48xlarge)",
    "visible": "CUDA_VISIBLE_DEVICES: the Neuron device plugin makes the granted NeuronCores visible itself; "
    "delete this (a NEURON_RT_VISIBLE_CORES here would have to match the cores it grants)",
    "toleration": "tolerates the taint of NVIDIA GPU nodes: tolerate the taint of your Trainium node group instead",
    "label": "{label} is a label of NVIDIA's GPU feature discovery: select Trainium nodes by "
    "node.kubernetes.io/instance-type (e.g. trn2.48xlarge) instead",
}

_JOB = (
    "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n      - name: train\n"
    "        resources:\n          limits:\n"
)

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM828",
        name="k8s-neuron-resources",
        summary="Kubernetes: `nvidia.com/gpu` limits/requests -> `aws.amazon.com/neuroncore`, with the counts explained.",
        rationale="The Neuron device plugin registers `aws.amazon.com/neuroncore` (single NeuronCores) and "
        "`aws.amazon.com/neuron` (whole devices, all their cores) (" + PLUGIN_DOC + "). One core per former "
        "GPU keeps one process per allocated accelerator, so the container's torchrun line still matches; a "
        "Trainium2 device holds 8 physical cores, paired into logical cores by the default LNC=2 ("
        + LNC_DOC
        + "), so whole devices are the other choice, which the TODO names. A manifest is a YAML document with "
        "`apiVersion` and `kind`; every document of a multi-document file is migrated.",
        before=_JOB + "            nvidia.com/gpu: 8\n",
        after=_JOB
        + "            "
        + _todo("NM828", TODO_TEXT["resource"].format(count="8"))
        + "            aws.amazon.com/neuroncore: 8\n",
        safety="unsafe",
        safety_reason="the pod gets NeuronCores instead of GPUs: memory and compute per process differ",
        language="yaml",
    ),
    Rule(
        id="NM829",
        name="k8s-gpu-placement",
        summary="TODO: CUDA container images, GPU instance-type node selectors and NVIDIA node labels.",
        rationale="A CUDA image has no Neuron runtime or torch-neuronx, and a GPU instance type never schedules on "
        "Trainium. The replacement image and node group are a person's choice, so the TODO names what to use "
        "and the value stays.",
        before=_JOB.replace("resources:\n          limits:\n", "image: nvcr.io/nvidia/pytorch:24.05-py3\n"),
        after=_JOB.replace(
            "resources:\n          limits:\n",
            _todo("NM829", TODO_TEXT["image"].format(image="nvcr.io/nvidia/pytorch:24.05-py3"))
            + "        image: nvcr.io/nvidia/pytorch:24.05-py3\n",
        ),
        safety="safe",
        todo=True,
        language="yaml",
    ),
)
