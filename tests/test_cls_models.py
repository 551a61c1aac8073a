"""Model sizes by hand, the ConvNet's layer outputs, and stacked devices = independent devices."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from frd.classification.devices import BatchStream, DeviceModels, DeviceStack
from frd.classification.models import MLP, ConvNet, SmallCNN, build_model, count_parameters
from frd.classification.training import per_device_cross_entropy
from frd.errors import FrdError


def test_seed_cnn_has_12600_parameters_on_mnist():
    # conv 1→10 5×5: 250+10; conv 10→30 5×5: 7500+30; fc 30·4·4=480 → 10: 4800+10
    assert count_parameters(SmallCNN((1, 28, 28), 10)) == 260 + 7530 + 4810 == 12600


def test_digits_mlp_and_convnet_sizes():
    assert count_parameters(MLP((1, 8, 8), 10)) == 64 * 64 + 64 + 64 * 10 + 10
    # 3 × (conv 3×3 + GroupNorm affine), MNIST 28 → 14 → 7 → 3, linear 128·3·3 → 10
    conv = (1 * 9 + 1) * 128 + 2 * (128 * 9 + 1) * 128
    assert count_parameters(ConvNet((1, 28, 28), 10)) == conv + 3 * 2 * 128 + 128 * 9 * 10 + 10


def test_convnet_layer_outputs_are_the_three_blocks_then_the_logits():
    net = ConvNet((3, 32, 32), 10, width=8)
    x = torch.rand(2, 3, 32, 32)
    outputs = net.layer_outputs(x)
    assert [tuple(o.shape) for o in outputs] == [(2, 8, 16, 16), (2, 8, 8, 8), (2, 8, 4, 4), (2, 10)]
    assert torch.equal(outputs[-1], net(x))
    assert torch.equal(outputs[0], net.blocks[0](x))


def test_cnn_on_images_too_small_says_what_to_use():
    with pytest.raises(FrdError, match="too small for the cnn"):
        build_model("cnn", "digits", (1, 8, 8), 10)


def test_auto_picks_mlp_for_digits_and_width_is_passed():
    assert isinstance(build_model("auto", "digits", (1, 8, 8), 10), MLP)
    assert build_model("convnet", "mnist", (1, 28, 28), 10, width=16).classifier.in_features == 16 * 9


def test_stacked_sgd_equals_independent_per_device_sgd():
    torch.manual_seed(0)
    template = MLP((1, 4, 4), 3, width=5)
    stack = DeviceStack(template, range(3))
    singles = [copy.deepcopy(template) for _ in range(3)]
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in singles]
    for _ in range(4):
        x, y = torch.rand(3, 6, 1, 4, 4), torch.randint(0, 3, (3, 6))
        stack.sgd_step(per_device_cross_entropy(stack(x), y).sum(), 0.1)
        for d, (model, opt) in enumerate(zip(singles, optimizers)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[d]), y[d]).backward()
            opt.step()
    for d, model in enumerate(singles):
        expected = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
        np.testing.assert_allclose(stack.flat(d), expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(stack.flat(0), stack.flat(1)), "devices trained on different data differ"


def test_flat_round_trip_and_module_copy():
    models = DeviceModels(MLP((1, 2, 2), 2, width=3), range(2))
    vector = np.arange(models.flat(0).size, dtype=np.float32)
    models.load_flat(1, vector)
    assert np.array_equal(models.flat(1), vector) and not np.array_equal(models.flat(0), vector)
    assert torch.equal(models.module(1).hidden.bias, torch.tensor([12.0, 13.0, 14.0]))


def test_device_models_share_what_devices_hold_in_common():
    """Copy-on-write: the initial model and a broadcast are stored once; a device that trains gets
    its own vector, and training a stack of some devices leaves the others' weights untouched."""
    template = MLP((1, 2, 2), 2, width=3)
    models = DeviceModels(template, [5, 6, 7, 8])
    assert models.stored_vectors() == 1
    broadcast = np.linspace(-1, 1, models.flat(5).size, dtype=np.float32)
    for device in (5, 6, 7):
        models.load_flat(device, broadcast.copy())
    assert models.stored_vectors() == 2, "one broadcast vector for three devices, the initial one for device 8"
    part = models.stack([models.row(6), models.row(7)])
    assert part.ids == [6, 7] and torch.equal(part.flat(0), torch.from_numpy(broadcast))
    with torch.no_grad():
        part.params[0][1].add_(1.0)  # device 7 trains
    models.put_back(part)
    assert np.array_equal(models.flat(5), broadcast) and np.array_equal(models.flat(6), broadcast)
    assert models.flat(7)[0] == broadcast[0] + 1.0
    initial = torch.cat([p.detach().reshape(-1) for p in template.parameters()]).numpy()
    assert np.array_equal(models.flat(8), initial)
    minus_zero = np.zeros_like(broadcast)
    minus_zero[0] = -0.0
    models.load_flat(5, np.zeros_like(broadcast))
    models.load_flat(6, minus_zero)
    assert np.signbit(models.flat(6)[0]) and not np.signbit(models.flat(5)[0]), "shared only when bitwise equal"


def test_batch_stream_walks_each_device_through_shuffled_epochs():
    parts = [np.array([0, 1, 2, 3]), np.array([10, 11, 12])]
    stream = BatchStream(parts, [1, 2])
    first = stream.take(2, 2)  # [iterations, devices, batch]
    assert first.shape == (2, 2, 2)
    assert sorted(first[:, 0].ravel().tolist()) == [0, 1, 2, 3], "one full epoch of device 0"
    more = np.concatenate([first[:, 1].ravel(), stream.take(1, 2)[:, 1].ravel()])
    assert sorted(more[:3].tolist()) == [10, 11, 12] and set(more[3:].tolist()) <= {10, 11, 12}
