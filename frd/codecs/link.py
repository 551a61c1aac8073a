"""One run's codecs between its payloads and the ledger: what each participant sends and
receives is encoded, charged as encoded and used as decoded, so a codec's error is felt.

Which arrays: those sent as 32-bit floats (weights, outputs, states, policies, synthetic images).
Integer arrays (cell indices, labels) and 8-bit pixels are already at their own width and pass as
they are [our choice, one rule for every method]; a payload of those alone costs what it did.

Weights travel as updates by default (``--compress update``): a participant's upload is its
weights minus the weights it last received, and a download is the server's weights minus what that
participant last received, so a device that missed rounds is sent (and charged for) what it needs
to rebuild the current model [FedPAQ, Reisizadeh et al. 2020, §3]. Before its first download a
participant's reference is zero, so its first upload is its whole model [our choice]. A lossless
codec sends the weights themselves (an update would add float rounding and save nothing).

Error feedback (``--error-feedback``) keeps, per participant and weight array, what its uplink
codec dropped and adds it to its next upload [Seide et al. 2014; Karimireddy et al. 2019, Alg. 2].
It applies to weights only: the rows of a memory or an output table are other samples each round
[our reading]. Stochastic draws come from a stream of their own per (run, round, participant,
direction), so a run's encoding does not depend on the batch, the backend or an interruption.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from frd.codecs import Codec, parse_codec
from frd.codecs.base import Parts
from frd.errors import FrdError
from frd.payload import FLOAT_BITS, Array, Payload
from frd.seeding import Stream, derive_seed

WEIGHT_KINDS = frozenset({"weights", "global_weights"})
"""Payload kinds that carry a model: sent as updates, with error feedback where asked."""
DIRECTIONS = {"up": 0, "down": 1}
COMPRESS = ("update", "weights")
"""What a weight payload's codec compresses: the update (the default) or the weights themselves."""
PART = "/"
"""Between an array's name and its part's in an encoded payload (``weights/codes``)."""


@dataclass(frozen=True)
class CodecSettings:
    """The codecs of an experiment, as its config holds them."""

    up: str = "fp32"
    down: str = "fp32"
    error_feedback: bool = False
    compress: str = "update"

    @property
    def is_default(self) -> bool:
        """fp32 both ways with no error feedback: payloads pass untouched, tables as before codecs."""
        return self == CodecSettings(compress=self.compress)

    def validate(self, sends_floats: bool) -> None:
        """Each codec known, error feedback only after a lossy uplink, ``compress`` a choice, and a
        codec only where a method sends floats (``sends_floats``)."""
        up, down = parse_codec(self.up), parse_codec(self.down)
        if self.error_feedback and up.lossless:
            raise FrdError(f"--error-feedback carries what a lossy uplink codec drops; --codec-up {up.spec} drops "
                           "nothing (give e.g. --codec-up topk:0.01)")
        if self.compress not in COMPRESS:
            raise FrdError(f"--compress takes {' or '.join(COMPRESS)}, got {self.compress!r}")
        if not sends_floats and not (up.lossless and down.lossless):
            raise FrdError("--codec-up and --codec-down encode what a method sends, and no method asked sends "
                           "anything (independent learns alone)")


def _compressible(array: Array) -> bool:
    return array.bits_per_element == FLOAT_BITS and np.asarray(array.values).dtype.kind == "f"


@dataclass
class CodecLink:
    """The codecs of one run and what they remember: each participant's reference weights (what
    it last received) and its error-feedback residuals."""

    settings: CodecSettings
    seed: int
    reference: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    residual: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.codecs: dict[str, Codec] = {"up": parse_codec(self.settings.up), "down": parse_codec(self.settings.down)}

    def send(self, payload: Payload, participant: int, round_: int, direction: str) -> tuple[Payload, Payload]:
        """(what crosses the link, what the receiver decodes) of ``payload``; for a download, call
        ``received`` once it is delivered."""
        codec = self.codecs[direction]
        if codec.lossless or not any(map(_compressible, payload.arrays.values())):
            return payload, payload
        rng = np.random.default_rng(derive_seed(self.seed, Stream.CODEC, round_, participant, DIRECTIONS[direction]))
        weights = payload.kind in WEIGHT_KINDS
        update = weights and self.settings.compress == "update"
        feedback = weights and direction == "up" and self.settings.error_feedback
        reference = self.reference.get(participant, {}) if update else {}
        residual = self.residual.setdefault(participant, {}) if feedback else {}
        encoded: dict[str, Array] = {}
        decoded: dict[str, Array] = {}
        for name, array in payload.arrays.items():
            if not _compressible(array):
                encoded[name] = decoded[name] = array
                continue
            values = np.asarray(array.values, np.float32)
            base = reference.get(name)
            x = (values - base if base is not None else values).reshape(-1)
            if feedback and name in residual:
                x = x + residual[name]
            parts: Parts = codec.encode(x, rng)
            estimate = codec.decode({k: a.values for k, a in parts.items()}, x.size)
            if feedback:
                residual[name] = x - estimate
            out = estimate.reshape(values.shape)
            decoded[name] = Array(out + base if base is not None else out, FLOAT_BITS)
            encoded.update({name + PART + k: a for k, a in parts.items()})
        return Payload(payload.kind, encoded, payload.entries), Payload(payload.kind, decoded, payload.entries)

    def received(self, participant: int, payload: Payload) -> None:
        """``participant`` holds ``payload`` (decoded): its weights are its next reference."""
        if payload.kind in WEIGHT_KINDS and self.settings.compress == "update":
            held = self.reference.setdefault(participant, {})
            held.update({k: np.asarray(a.values, np.float32) for k, a in payload.arrays.items() if _compressible(a)})


def codec_link(settings: CodecSettings, seed: int) -> CodecLink | None:
    """Run ``seed``'s codecs; None at the defaults, whose payloads pass untouched."""
    return None if settings.is_default else CodecLink(settings, seed)
