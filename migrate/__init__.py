"""neuron-migrate: a libcst codemod that ports CUDA and Optimum Neuron scripts to native TorchNeuron."""
