"""Codecs (``frd.codecs``): bits by hand from what each encoder produced, decoding within each
codec's bound, unbiased stochastic rounding, error feedback and weight updates by hand, the
rounds of both domains charged as encoded and trained as decoded, and one-line refusals."""
import json

import numpy as np
import pandas as pd
import pytest

from frd.cli import main
from frd.codecs import parse_codec
from frd.codecs.link import CodecLink, CodecSettings, codec_link
from frd.frontier import Frontier, frontier_figure, frontier_table, pareto_front
from frd.payload import FLOAT_BITS, PIXEL_BITS, Payload
from frd.rl.config import rl_config
from frd.rl.runner import iter_simulate

RNG = np.random.default_rng(0)


def _bits(parts) -> int:
    return sum(a.bits for a in parts.values())


def _round_trip(spec: str, x: np.ndarray, seed: int = 0) -> tuple[np.ndarray, int]:
    codec = parse_codec(spec)
    parts = codec.encode(x, np.random.default_rng(seed))
    return codec.decode({k: a.values for k, a in parts.items()}, x.size), _bits(parts)


@pytest.mark.parametrize("spec, n, bits", [
    ("fp32", 10, 320), ("fp16", 10, 160), ("bf16", 10, 160),
    ("q8", 10, 10 * 8 + 64),        # codes and the min and max at 32 bits
    ("q1", 5, 5 + 64), ("q16", 3, 3 * 16 + 64),
    ("topk:0.2", 10, 2 * 4 + 2 * 32),            # ⌈0.2·10⌉ = 2 entries, indices of ⌈log2 10⌉ = 4 bits
    ("topk:0.25+q8", 10, 3 * 4 + 3 * 8 + 64),    # ⌈2.5⌉ = 3, values quantized
    ("topk:1", 1, 1 + 32),                       # one entry: a 1-bit index
])
def test_bits_are_those_of_the_parts_the_encoder_produced(spec, n, bits):
    assert _round_trip(spec, RNG.standard_normal(n).astype(np.float32))[1] == bits


def test_a_non_finite_entry_costs_a_one_bit_mask_and_decodes_as_nan():
    x = np.array([0.5, np.nan, -1.0, 2.0], np.float32)  # FD's outputs for a label a device never saw
    out, bits = _round_trip("q8", x)
    assert bits == 4 + 3 * 8 + 64 and np.isnan(out[1]) and np.isfinite(out[[0, 2, 3]]).all()
    out, bits = _round_trip("fp16", x)
    assert bits == 64 and np.isnan(out[1])
    out, _ = _round_trip("bf16", x)
    assert np.isnan(out[1]) and out[3] == 2.0


def test_each_codec_decodes_within_its_bound():
    x = RNG.standard_normal(1000).astype(np.float32) * 3
    assert np.array_equal(_round_trip("fp32", x)[0], x)
    assert np.abs(_round_trip("fp16", x)[0] - x).max() <= np.abs(x).max() * 2.0 ** -11
    relative = np.abs(_round_trip("bf16", x)[0] - x) / np.abs(x)
    assert relative.max() <= 2.0 ** -8 and relative.max() > 2.0 ** -12  # rounded to 8 significant bits
    for b in (1, 2, 4, 8, 16):
        step = (float(x.max()) - float(x.min())) / (2 ** b - 1)
        out = _round_trip(f"q{b}", x)[0]
        assert np.abs(out - x).max() <= step * (1 + 1e-6) and out.min() >= x.min() and out.max() <= x.max()


def test_top_k_keeps_the_largest_magnitudes_exactly_and_zeroes_the_rest():
    x = np.array([0.1, -3.0, 2.0, 0.5, 2.0], np.float32)
    assert _round_trip("topk:0.4", x)[0].tolist() == [0.0, -3.0, 2.0, 0.0, 0.0]  # a tie goes to the lower index
    assert _round_trip("topk:0.2", x)[0].tolist() == [0.0, -3.0, 0.0, 0.0, 0.0]


def test_bfloat16_rounds_to_nearest_even_as_torch_does():
    torch = pytest.importorskip("torch")
    x = np.concatenate([RNG.standard_normal(500) * 10.0 ** RNG.integers(-6, 6, 500), [1 + 2 ** -8, 1 + 3 * 2 ** -8]])
    x = x.astype(np.float32)
    expected = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    assert np.array_equal(_round_trip("bf16", x)[0], expected)


def test_stochastic_rounding_is_unbiased_and_drawn_from_its_generator():
    x = np.array([0.0, 0.1, 0.37, 0.5, 0.99, 1.0], np.float32)
    codec = parse_codec("q2")
    rng = np.random.default_rng(7)
    mean = np.mean([codec.decode({k: a.values for k, a in codec.encode(x, rng).items()}, x.size)
                    for _ in range(20_000)], axis=0)
    step = 1 / 3
    assert np.abs(mean - x).max() < 5 * step / 2 / np.sqrt(20_000)  # 5σ of the mean (σ of one ≤ step/2)
    once = _round_trip("q2", x, seed=3)[0]
    assert np.array_equal(once, _round_trip("q2", x, seed=3)[0]) and not all(
        np.array_equal(once, _round_trip("q2", x, seed=s)[0]) for s in range(4, 10))
    assert _round_trip("q1", np.array([0.0, 1.0], np.float32))[0].tolist() == [0.0, 1.0]  # the ends are levels


def _weights(values) -> Payload:
    return Payload.of("weights", len(values), w=(np.array(values, np.float32), FLOAT_BITS))


def test_error_feedback_carries_what_the_codec_dropped_into_the_next_upload():
    link = CodecLink(CodecSettings(up="topk:0.5", error_feedback=True), seed=0)
    sent, decoded = link.send(_weights([1.0, 2.0, -4.0, 0.5]), 0, 1, "up")
    assert decoded["w"].tolist() == [0.0, 2.0, -4.0, 0.0] and link.residual[0]["w"].tolist() == [1.0, 0.0, 0.0, 0.5]
    assert sent.bits == 2 * 2 + 2 * 32 and set(sent.arrays) == {"w/shape", "w/index", "w/values.values"}
    _, decoded = link.send(_weights([1.0, 2.0, -4.0, 0.5]), 0, 2, "up")  # sends [2, 2, -4, 1]: keeps -4 and the first 2
    assert decoded["w"].tolist() == [2.0, 0.0, -4.0, 0.0] and link.residual[0]["w"].tolist() == [0.0, 2.0, 0.0, 1.0]
    assert 1 not in link.residual  # per participant


def test_weights_travel_as_the_update_from_what_the_participant_last_received():
    link = CodecLink(CodecSettings(up="topk:0.5", down="topk:0.5"), seed=0)
    _, got = link.send(_weights([1.0, 1.0, 1.0, 1.0]), 0, 1, "down")  # no reference yet: the whole model
    assert got["w"].tolist() == [1.0, 1.0, 0.0, 0.0]
    link.received(0, got)
    _, up = link.send(_weights([1.0, 3.0, 0.0, -1.0]), 0, 2, "up")  # update [0, 2, 0, -1]: two entries say it all
    assert up["w"].tolist() == [1.0, 3.0, 0.0, -1.0]
    _, down = link.send(_weights([2.0, 1.0, 0.0, 5.0]), 0, 2, "down")  # from [1, 1, 0, 0]: +1 and +5
    assert down["w"].tolist() == [2.0, 1.0, 0.0, 5.0]
    whole = CodecLink(CodecSettings(up="topk:0.5", compress="weights"), seed=0)
    whole.received(0, got)
    assert whole.send(_weights([1.0, 3.0, 0.0, -1.0]), 0, 2, "up")[1]["w"].tolist() == [1.0, 3.0, 0.0, 0.0]


def test_ends_that_code_apart_rebuild_what_one_link_decodes():
    """A remote participant encodes its uploads and decodes its downloads with its own link, kept
    as bytes between messages; the server only decodes uploads and encodes downloads. Both ends
    rebuild, bit for bit, what a single link decodes in process, and what crossed carries its shape."""
    settings = CodecSettings(up="topk:0.5+q8", down="q4", error_feedback=True)
    one, server = CodecLink(settings, seed=3), CodecLink(settings, seed=3, participants_code=True)
    node = CodecLink(settings, seed=3)
    rng = np.random.default_rng(0)
    for round_ in (1, 2, 3):
        weights = Payload.of("weights", 6, w=(rng.normal(size=(2, 3)).astype(np.float32), FLOAT_BITS))
        sent, expected = one.send(weights, 0, round_, "up")
        crossed = node.send(weights, 0, round_, "up")[0]
        arrived, decoded = server.send(crossed, 0, round_, "up")
        assert arrived is crossed and decoded["w"].tobytes() == expected["w"].tobytes() and crossed.bits == sent.bits
        assert crossed["w/shape"].tolist() == [2, 3] and crossed.arrays["w/shape"].bits == 0
        down, expected = one.send(weights, 0, round_, "down")
        _, at_server = server.send(weights, 0, round_, "down")
        at_node = node.decode(at_server.crossed, 0, "down")
        assert at_node["w"].tobytes() == at_server["w"].tobytes() == expected["w"].tobytes()
        for link, got in ((one, expected), (server, at_server), (node, at_node)):
            link.received(0, got)
        kept = node.kept(0)
        node = CodecLink(settings, seed=3)  # a fresh process: what the node kept, as bytes
        node.restore(0, {k: np.frombuffer(v.tobytes(), np.float32).reshape(v.shape) for k, v in kept.items()})
    assert set(kept) == {"codec.reference.w", "codec.residual.w"} and not server.residual


def test_integer_and_pixel_arrays_pass_as_they_are_and_the_defaults_touch_nothing():
    link = CodecLink(CodecSettings(up="q4"), seed=0)
    payload = Payload.of("seed_samples", 2, x=(np.array([[3, 250]], np.uint8), PIXEL_BITS),
                         label=(np.array([1, 7]), 4), score=(np.array([0.25], np.float32), FLOAT_BITS))
    sent, decoded = link.send(payload, 0, 1, "up")
    assert sent.bits == 2 * 8 + 2 * 4 + (4 + 64) and decoded["x"] is payload["x"] and decoded["score"].tolist() == [0.25]
    assert codec_link(CodecSettings(), 0) is None and codec_link(CodecSettings(compress="weights"), 0) is None


def test_with_codecs_a_run_is_the_same_alone_and_in_a_batch():
    config = rl_config(("frl", "pd", "frd"), agents=2, hidden=8, max_episodes=30, period=5, target=1e9,
                       codec_up="topk:0.2+q4", codec_down="q8", error_feedback=True)
    runs = [(m, s) for s in range(2) for m in config.methods]
    together = {t["runs"]["run_id"].iloc[0]: t for t in iter_simulate(config, runs)}
    for run in runs[1::2]:
        (alone,) = iter_simulate(config, [run])
        for name in ("episodes", "ledger", "rounds"):
            pd.testing.assert_frame_equal(alone[name], together[alone["runs"]["run_id"].iloc[0]][name], check_exact=True)


RL = ["rl", "--method", "frl", "--agents", "2", "--seeds", "2", "--hidden", "8", "--max-episodes", "30",
      "--period", "5", "--target", "1e9", "--no-progress"]
CLS = ["cls", "--method", "fl,fd", "--seeds", "1", "--rounds", "2", "--iterations", "5", "--no-progress"]


def test_rl_rounds_are_charged_as_encoded(tmp_path):
    assert main([*RL, "--codec-up", "q8", "--codec-down", "fp16", "--out", str(tmp_path / "q8")]) == 0
    assert main([*RL, "--out", str(tmp_path / "fp32")]) == 0
    ledger = {name: pd.read_csv(tmp_path / name / "ledger.csv") for name in ("q8", "fp32")}
    weights = 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2  # actor 4-8-8-2: six arrays
    by = {name: frame.groupby("direction")["bits"].unique() for name, frame in ledger.items()}
    assert by["fp32"]["up"].tolist() == [32 * weights] and by["fp32"]["down"].tolist() == [32 * weights]
    assert by["q8"]["up"].tolist() == [8 * weights + 6 * 64] and by["q8"]["down"].tolist() == [16 * weights]
    models = {name: sorted(p.read_bytes() for p in (tmp_path / name / "models").glob("*.pt")) for name in ("q8", "fp32")}
    assert len(models["q8"]) == 2 and models["q8"] != models["fp32"]  # the learners took the decoded weights


def test_classification_rounds_are_charged_as_encoded(tmp_path):
    assert main([*CLS, "--codec-up", "q4", "--codec-down", "bf16", "--out", str(tmp_path / "q4")]) == 0
    ledger = pd.read_csv(tmp_path / "q4" / "ledger.csv")
    up = ledger[(ledger.direction == "up") & (ledger["round"] > 0)]
    assert set(up[up.kind == "weights"]["bits"]) == {4810 * 4 + 64}  # the digits MLP's 4,810 weights
    assert set(up[up.kind == "outputs"]["bits"]) <= {100 * 4 + 64, 100 + 100 * 4 + 64}  # NaN rows add the mask
    assert set(ledger[ledger.direction == "down"]["bits"]) <= {4810 * 16, 100 * 16}


@pytest.mark.parametrize("flags, message", [
    (["--codec-up", "fp8"], "unknown codec 'fp8'; choose fp32, fp16, bf16, q<b>"),
    (["--codec-down", "q17"], "q<b> takes b = 1 … 16 bits, got q17"),
    (["--codec-up", "q0"], "q<b> takes b = 1 … 16 bits, got q0"),
    (["--codec-up", "topk:0"], "topk's fraction must lie in (0, 1], got 0"),
    (["--codec-up", "topk:1.5"], "topk's fraction must lie in (0, 1], got 1.5"),
    (["--error-feedback"], "--error-feedback carries what a lossy uplink codec drops; --codec-up fp32"),
])
def test_bad_codecs_are_one_line_exit_2_and_nothing_written(flags, message, tmp_path, capsys):
    for command in (RL, CLS):
        assert main([*command, *flags, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
        assert not (tmp_path / "out").exists()


def test_a_codec_for_methods_that_send_nothing_is_refused(tmp_path, capsys):
    assert main([*RL[:2], "independent", *RL[3:], "--codec-up", "q8", "--out", str(tmp_path / "out")]) == 2
    assert "no method asked sends anything (independent learns alone)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_pareto_front_is_the_rows_no_other_row_beats_at_no_more_cost():
    cost = np.array([0.0, 10.0, 20.0, 20.0, 5.0, np.nan, 40.0])
    episodes = np.array([300.0, 250.0, 250.0, 200.0, 310.0, 100.0, 200.0])  # fewer is better
    assert pareto_front(cost, episodes, higher_is_better=False).tolist() == [True, True, False, True, False, False, False]
    accuracy = np.array([0.5, 0.7, 0.9, 0.9, 0.4, 0.95, 0.95])
    assert pareto_front(cost, accuracy, higher_is_better=True).tolist() == [True, True, True, True, False, False, True]


def test_the_frontier_table_divides_the_cost_per_agent_and_marks_the_front():
    summary = pd.DataFrame({"method": ["independent", "frl", "frl", "frd"], "codec_up": ["fp32", "fp32", "q8", "fp32"],
                            "agents": [2, 2, 2, 4], "bits_up_total": [0, 8000, 2000, 4000],
                            "mission_episodes_iqm": [400.0, 300.0, 310.0, 320.0],
                            "mission_episodes_iqm_lo": [380.0, 280.0, 290.0, 300.0],
                            "mission_episodes_iqm_hi": [420.0, 320.0, 330.0, 340.0]})
    frontier = Frontier("frontier", "mission_episodes_iqm", "mission episodes", "bits_up_total", "bits per agent",
                        higher_is_better=False, per="agents")
    table = frontier_table(summary, frontier, ["method", "codec_up"])
    assert table["cost"].tolist() == [0, 4000, 1000, 1000] and table["pareto"].tolist() == [True, True, True, False]
    assert table["outcome_lo"].tolist() == [380.0, 280.0, 290.0, 300.0]
    figure = frontier_figure(table, frontier, lambda rows: [("", {"color": "C0", "marker": "o"}, rows)])
    assert figure.axes[0].get_xscale() == "log" and figure.axes[0].get_lines()  # the costless row: a line
    per_agents = frontier_table(summary, frontier, ["method", "codec_up"], within=["agents"])
    assert per_agents["pareto"].tolist() == [True, True, True, True]  # alone at 4 agents, frd is its own front
    assert len(frontier_figure(per_agents, frontier, lambda rows: [("", {"color": "C0", "marker": "o"}, rows)],
                               within=["agents"]).axes) == 2  # a panel per agent count


def test_a_codec_sweep_reports_its_frontier(tmp_path):
    assert main([*RL, "--sweep", "codec-up=fp32,q4", "--out", str(tmp_path / "sweep")]) == 0
    assert main(["report", str(tmp_path / "sweep")]) == 0
    frontier = pd.read_csv(tmp_path / "sweep" / "frontier.csv")
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv")
    assert frontier["codec_up"].tolist() == ["fp32", "q4"]
    assert frontier["cost"].tolist() == (summary["bits_up_total"] / 2).tolist()
    assert frontier["cost"].iloc[1] < frontier["cost"].iloc[0] / 3  # 4 bits a weight and 64 a layer, against 32
    assert frontier["pareto"].iloc[1]  # the same 30 capped episodes for fewer bits
    assert all((tmp_path / "sweep" / "figures" / f"frontier.{kind}").exists() for kind in ("png", "pdf"))


def test_frds_proxy_layout_was_its_codec_and_old_folders_still_resume(tmp_path, capsys):
    frd = ["rl", "--method", "frd", "--agents", "2", "--seeds", "1", "--hidden", "8", "--max-episodes", "10",
           "--period", "5", "--no-progress", "--out", str(tmp_path)]
    assert main([*frd, "--proxy-layout", "compact"]) == 0
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["resume_key"]["methods"]["frd"]["codec"] == "compact"  # the key keeps the old name
    options = saved["config"]["options"]["frd"]
    options["codec"] = options.pop("proxy_layout")  # config.json as frd wrote it before the rename
    (tmp_path / "config.json").write_text(json.dumps(saved))
    runs = (tmp_path / "runs.csv").read_bytes()
    assert main([*frd, "--codec", "compact"]) == 0 and (tmp_path / "runs.csv").read_bytes() == runs  # resumed: nothing ran
    assert main(["report", str(tmp_path)]) == 0
    assert rl_config("frd", codec="compact").options["frd"].proxy_layout == "compact"
