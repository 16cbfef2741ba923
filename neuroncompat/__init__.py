"""neuroncompat: run Hugging Face scripts natively on AWS Trainium (TorchNeuron)."""
