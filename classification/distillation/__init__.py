"""The dataset-distillation engine of FedDualMatch and FedDM: the clients' distribution matching
(``client``), the server's gradient matching and fine-tuning (``server``), the Gaussian mechanism
(``dp``), and the ConvNet's fused numba kernels and hand-walked gradients (``norm_block``,
``first_block``, ``dense_conv``, ``convnet_grads``)."""
