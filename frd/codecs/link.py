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

Where participants live elsewhere (Flower nodes), each end codes its own transfers: a participant
encodes its upload (keeping its residuals) and decodes its download; the server decodes uploads
and encodes downloads, keeping every participant's reference, which both ends update from the same
decoded download. What crosses is the encoded payload: each compressed array as its codec's parts
plus its shape (``name/shape``, 0 bits: the receiver knows a model's or a memory's layout, and no
fp32 payload is charged for its shapes either [our choice]).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

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
SHAPE = "shape"
"""The part that gives an encoded array's shape (charged 0 bits)."""


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
    it last received) and its error-feedback residuals. ``participants_code``: the server's side of
    a run whose participants encode their uploads themselves (remote ones): ``send`` of an upload
    then only decodes what arrived."""

    settings: CodecSettings
    seed: int
    participants_code: bool = False
    reference: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    residual: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.codecs: dict[str, Codec] = {"up": parse_codec(self.settings.up), "down": parse_codec(self.settings.down)}

    def send(self, payload: Payload, participant: int, round_: int, direction: str) -> tuple[Payload, Payload]:
        """(what crosses the link, what the receiver decodes) of ``payload``; for a download, call
        ``received`` once it is delivered. The decoded payload keeps what crossed (``crossed``)."""
        if self.participants_code and direction == "up":
            return payload, self.decode(payload, participant, direction)
        codec = self.codecs[direction]
        if codec.lossless or not any(map(_compressible, payload.arrays.values())):
            return payload, payload
        rng = np.random.default_rng(derive_seed(self.seed, Stream.CODEC, round_, participant, DIRECTIONS[direction]))
        weights = payload.kind in WEIGHT_KINDS
        feedback = weights and direction == "up" and self.settings.error_feedback
        reference = self._reference(payload, participant)
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
            decoded[name] = Array(_rebuilt(estimate, values.shape, base), FLOAT_BITS)
            encoded[name + PART + SHAPE] = Array(np.array(values.shape, np.int64), 0)
            encoded.update({name + PART + k: a for k, a in parts.items()})
        crossed = Payload(payload.kind, encoded, payload.entries)
        return crossed, Payload(payload.kind, decoded, payload.entries, crossed=crossed)

    def decode(self, payload: Payload, participant: int, direction: str) -> Payload:
        """What the receiver of ``payload`` (as it crossed, from or to ``participant``) rebuilds:
        the same arrays ``send`` decoded (a payload no codec touched is itself)."""
        shaped = [name[:-len(PART + SHAPE)] for name in payload.arrays if name.endswith(PART + SHAPE)]
        if not shaped:
            return payload
        codec, reference = self.codecs[direction], self._reference(payload, participant)
        decoded = {k: a for k, a in payload.arrays.items() if not any(k.startswith(n + PART) for n in shaped)}
        for name in shaped:
            shape = tuple(int(n) for n in payload[name + PART + SHAPE])
            parts = {k[len(name + PART):]: a.values for k, a in payload.arrays.items()
                     if k.startswith(name + PART) and k != name + PART + SHAPE}
            estimate = codec.decode(parts, int(np.prod(shape, dtype=np.int64)))
            decoded[name] = Array(_rebuilt(estimate, shape, reference.get(name)), FLOAT_BITS)
        return Payload(payload.kind, decoded, payload.entries, crossed=payload)

    def _reference(self, payload: Payload, participant: int) -> Mapping[str, np.ndarray]:
        """What an update of ``payload`` is taken from: ``participant``'s last received weights."""
        update = payload.kind in WEIGHT_KINDS and self.settings.compress == "update"
        return self.reference.get(participant, {}) if update else {}

    def received(self, participant: int, payload: Payload) -> None:
        """``participant`` holds ``payload`` (decoded): its weights are its next reference."""
        if payload.kind in WEIGHT_KINDS and self.settings.compress == "update":
            held = self.reference.setdefault(participant, {})
            held.update({k: np.asarray(a.values, np.float32) for k, a in payload.arrays.items() if _compressible(a)})

    def kept(self, participant: int) -> dict[str, np.ndarray]:
        """What ``participant``'s end remembers (its reference and residuals), as named arrays for
        a node that keeps its state as bytes between messages."""
        return {**{f"codec.reference.{k}": v for k, v in self.reference.get(participant, {}).items()},
                **{f"codec.residual.{k}": v for k, v in self.residual.get(participant, {}).items()}}

    def restore(self, participant: int, arrays: Mapping[str, np.ndarray]) -> None:
        """Put back what ``kept`` returned (other arrays in ``arrays`` are ignored)."""
        for memory, prefix in ((self.reference, "codec.reference."), (self.residual, "codec.residual.")):
            held = {k[len(prefix):]: np.asarray(v, np.float32) for k, v in arrays.items() if k.startswith(prefix)}
            if held:
                memory[participant] = held


def _rebuilt(estimate: np.ndarray, shape: tuple[int, ...], base: np.ndarray | None) -> np.ndarray:
    """An array of ``shape`` from its decoded vector, plus the reference an update was taken from."""
    out = estimate.reshape(shape)
    return out + base if base is not None else out


def codec_link(settings: CodecSettings, seed: int, participants_code: bool = False) -> CodecLink | None:
    """Run ``seed``'s codecs; None at the defaults, whose payloads pass untouched."""
    return None if settings.is_default else CodecLink(settings, seed, participants_code)
