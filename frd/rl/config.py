"""The resolved configuration of an RL experiment: what every method shares, plus each method's
own resolved options (saved with every result; together they are the resume key)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from frd.agents.a2c import RECIPES, A2CConfig, for_env, recipe
from frd.agents.sb3 import SB3Config
from frd.agents.spec import AgentSpec, agent_configs, agent_specs, parse_agent_spec
from frd.agents.stacked import ACTIVATIONS
from frd.channel import CHANNELS, check_channel, parse_channel_option
from frd.clock import CLOCK_DEFAULTS, DEVICE_FLOPS, SERVER_FLOPS, ClockSettings
from frd.codecs.link import COMPRESS, CodecSettings
from frd.envs.lanes import check_env_id
from frd.errors import FrdError
from frd.options import build_options, document_keywords, options_key
from frd.participation import check_participation, participants
from frd.results import ResumeKey
from frd.rl.methods import RL_METHODS, RunSetup, get_method
from frd.rl.mission import default_target

UNTIL = ("first", "all")
"""When a run ends: at the mission (the first agent to complete), or once every agent completed."""

INITS = ("shared", "separate")
"""Initial weights: one per architecture for all of a run's agents (a server's initial model), or one per agent."""

ADDED_LATER = {"agent_spec": (), "init": "shared", "agents_per_round": None, "fraction": None,
               "codec_up": "fp32", "codec_down": "fp32", "error_feedback": False, "compress": "update",
               **CLOCK_DEFAULTS}
"""Fields added after results were saved, with their defaults: in the resume key only when set
otherwise, so folders written before them still resume."""


@dataclass(frozen=True)
class RLConfig:
    """One RL experiment: what every method shares, and each method's resolved options. Every
    field but ``methods`` and ``options`` is a flag of ``frd rl`` and ``frd compare``, its help
    the docstring below (``frd.options.add_config_flags``)."""

    methods: tuple[str, ...] = ("independent",)
    """Exchange methods to run, from ``frd.rl.methods.RL_METHODS`` (``--method``, ``--methods``)."""
    env_id: str = field(default="CartPole-v1", metadata={"flag": "env"})
    """Gymnasium env id (Box obs, Discrete actions)."""
    agents: int = 2
    """Agents per run, each with its own env and seed."""
    seeds: int = 20
    """Runs per method: seeds first_seed … first_seed+seeds−1 [our choice: 20, as in the studies; ``frd cls``'s
    default too]."""
    first_seed: int = 0
    """Seed of the first run."""
    hidden: int = 64
    """Hidden width h of actor and critic."""
    activation: str = field(default="tanh", metadata={"choices": ACTIVATIONS})
    """Hidden activation: tanh or relu."""
    recipe: str = field(default="nstep", metadata={"choices": RECIPES})
    """A2C recipe: nstep or rlcode (``frd.agents.a2c.RECIPES``)."""
    agent_spec: tuple[AgentSpec, ...] = field(default=(), metadata={"parse": str, "metavar": "SPEC"})
    """Per-agent learners, cycled over the agents, e.g. 'h=32;h=64;h=128,lr=3e-4;recipe=rlcode' or
    'algo=ppo;algo=dqn,sb3.learning_starts=500;h=64' (keys h, lr, recipe, algo=frd|ppo|a2c-sb3|dqn, sb3.<name>,
    qtemp, qstudent; a missing key: the common one; ``frd.agents.spec``)."""
    init: str = field(default="shared", metadata={"choices": INITS})
    """Initial weights: shared by the agents of one architecture (a server's initial model), or separate."""
    max_episodes: int = 2000
    """Episode cap per agent; a run that hits it is "not completed"."""
    period: int = 25
    """E: episodes per agent between exchange rounds."""
    agents_per_round: int | None = field(default=None, metadata={"metavar": "K"})
    """K: agents drawn (seeded) to take part in each round; the others learn on alone, wait at no barrier and
    send nothing (default: every agent, as in the letter)."""
    fraction: float | None = field(default=None, metadata={"metavar": "C"})
    """C: the share of the agents drawn per round instead, K = max(1, ⌊C·agents⌋) (FedAvg's C)."""
    target: float = field(default=490.0, metadata={"flag_default": None})
    """Mission score: an agent completes once its mean score over the latest ``window`` episodes reaches it
    (default: the env's: CartPole-v1 490 [Seo et al. 2022, §4], else gymnasium's reward threshold, e.g. Acrobot-v1 -100,
    LunarLander-v3 200)."""
    window: int = 10
    """Episodes in the mission average."""
    until: str = field(default="first", metadata={"choices": UNTIL})
    """A run ends when the first agent completes (first) or every agent does (all: runs.csv then has the
    slowest and the median agent's episodes), or at the episode cap."""
    channel: str = field(default="ideal", metadata={"choices": CHANNELS})
    """Channel model of every transfer (``frd.channel.CHANNELS``): ideal, or wireless with the letter's
    asymmetric or symmetric powers (wireless alone: asymmetric)."""
    channel_options: tuple = field(default=(), metadata={"flag": "channel-opt", "parse": parse_channel_option,
                                                         "repeat": True, "metavar": "NAME=VALUE"})
    """(name, value) overrides of the channel's parameters; on the command line NAME=VALUE, e.g. p_up_dbm=15
    (repeatable)."""
    codec_up: str = field(default="fp32", metadata={"metavar": "CODEC"})
    """How each agent encodes what it uploads: fp32 (as is), fp16, bf16, q<b> (b = 1 … 16 bits), topk:<f> or
    topk:<f>+<codec>, e.g. topk:0.01+q8 (``frd.codecs``); the ledger charges the encoding."""
    codec_down: str = field(default="fp32", metadata={"metavar": "CODEC"})
    """How the server encodes what each agent downloads (the same codecs)."""
    error_feedback: bool = False
    """Each agent adds what its uplink codec dropped from its weights to its next upload (needs a lossy --codec-up)."""
    compress: str = field(default="update", metadata={"choices": COMPRESS})
    """What a codec compresses of weights (frl): the update from what the agent last received, or the weights."""
    speed_spread: float = field(default=0.0, metadata={"metavar": "SIGMA"})
    """σ of each agent's device rate, lognormal around --device-flops (0: every device alike; ``frd.clock``);
    above 0 it needs --until all, since the first to complete in seconds is known only when every agent plays on."""
    round_policy: str = field(default="sync", metadata={"metavar": "POLICY"})
    """How a round closes on the virtual clock: sync (the last upload in) or deadline:<s> (uploads later than s
    after the round opened are left out, marked late in the ledger)."""
    device_flops: float = field(default=DEVICE_FLOPS, metadata={"metavar": "FLOPS"})
    """An agent's device rate (the median one's with --speed-spread), FLOP/s [our choice, ``frd.clock``]."""
    server_flops: float = field(default=SERVER_FLOPS, metadata={"metavar": "FLOPS"})
    """The server's rate, FLOP/s [our choice, ``frd.clock``]."""
    threads: int = 1
    """Torch threads (1 is fastest below ~256 lanes here)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Method → its resolved options (absent: the method's defaults)."""

    def agent_configs(self) -> list[A2CConfig]:
        """Each agent's A2C config: its ``agent_spec`` entry over the common recipe, width and
        activation, as it trains on this env (``frd.agents.a2c.for_env``)."""
        return [for_env(c, self.env_id) for c in agent_configs(self.agent_spec, self.agents, self.recipe,
                                                                 self.hidden, self.activation)]

    def sb3_configs(self) -> dict[int, SB3Config]:
        """Agent → its resolved Stable-Baselines3 learner, for the agents that have one."""
        return {a: spec.sb3_config(self.env_id) for a, spec in enumerate(agent_specs(self.agent_spec, self.agents))
                if spec.is_sb3}

    def algorithms(self) -> list[str]:
        """Each agent's ``algo`` (``frd`` for our A2C)."""
        return [spec.algorithm for spec in agent_specs(self.agent_spec, self.agents)]

    def run_setup(self, observation_space: Any, n_actions: int, seed: int) -> RunSetup:
        """What a method sees of one run before it starts (its checks, its strategy)."""
        d, sb3 = int(observation_space.shape[0]), self.sb3_configs()
        architectures = tuple(
            sb3[a].architecture(d, n_actions) if a in sb3 else f"actor {d}-{c.hidden}-{c.hidden}-{n_actions} {c.activation}"
            for a, c in enumerate(self.agent_configs()))
        return RunSetup(self.env_id, observation_space, n_actions, self.agents, seed,
                        tuple(c.hidden for c in self.agent_configs()), tuple(self.algorithms()), architectures)

    def options_for(self, method: str) -> Any:
        return self.options[method] if method in self.options else get_method(method).Options()

    def validate(self) -> None:
        """Every check that needs no results folder: counts, names, the env, each method's
        options against the env, the channel."""
        for name, value in (("agents", self.agents), ("seeds", self.seeds), ("max-episodes", self.max_episodes),
                            ("period", self.period), ("window", self.window), ("hidden", self.hidden),
                            ("threads", self.threads)):
            if value < 1:
                raise FrdError(f"--{name} must be at least 1, got {value}")
        if self.first_seed < 0:
            raise FrdError(f"--first-seed must be at least 0, got {self.first_seed}")
        self.check_participation()
        if math.isnan(self.target):
            raise FrdError("--target must be a number (inf: run every agent to the cap)")
        if self.until not in UNTIL:
            raise FrdError(f"--until takes {' or '.join(UNTIL)}, got {self.until!r}")
        if not self.methods:
            raise FrdError("give at least one method")
        if len(set(self.methods)) != len(self.methods):
            raise FrdError(f"a method is listed twice in {','.join(self.methods)}")
        methods = [get_method(m) for m in self.methods]
        recipe(self.recipe, hidden=self.hidden, activation=self.activation)
        if self.activation not in ACTIVATIONS:
            raise FrdError(f"unknown activation {self.activation!r}; choose {' or '.join(ACTIVATIONS)}")
        if self.init not in INITS:
            raise FrdError(f"--init takes {' or '.join(INITS)}, got {self.init!r}")
        env = check_env_id(self.env_id)
        self.sb3_configs()  # SB3 installed, every sb3.<name> a hyperparameter of its algorithm
        setup = self.run_setup(env.observation_space, int(env.action_space.n), self.first_seed)  # type: ignore[attr-defined]
        for name, method in zip(self.methods, methods):
            method.check(self.options_for(name), setup)
        check_channel(self.channel, dict(self.channel_options))
        self.codecs().validate(sends_floats=any(method.exchanges for method in methods))
        self.clock().validate()
        if self.speed_spread > 0 and self.until == "first":
            raise FrdError("--speed-spread above 0 needs --until all: under --until first a run stops at the first "
                           "agent to complete in episodes, who need not be the first in seconds")

    def codecs(self) -> CodecSettings:
        return CodecSettings(self.codec_up, self.codec_down, self.error_feedback, self.compress)

    def clock(self) -> ClockSettings:
        """The virtual clock's settings (every device online: availability is classification's for now)."""
        return ClockSettings(self.speed_spread, 1.0, self.round_policy, self.device_flops, self.server_flops)

    def check_participation(self) -> None:
        """K within 1 … agents, C within (0, 1], not both."""
        check_participation(self.agents, self.agents_per_round, self.fraction, total_flag="--agents",
                            per_round_flag="--agents-per-round")

    def per_round(self) -> int:
        """K: the agents that take part in a round (``agents``: every one); from ``fraction``,
        ⌊C·agents⌋ but at least one (``frd.participation``)."""
        return participants(self.agents, self.agents_per_round, self.fraction)

    def resume_key(self) -> ResumeKey:
        """Results change with these: the common fields (not the seeds, which runs a folder holds,
        the method list or the threads) and each method's resolved options."""
        common = {k: v for k, v in asdict(self).items() if k not in (*NOT_IN_KEY, "options")
                  and not (k in ADDED_LATER and v == ADDED_LATER[k])}
        if "agent_spec" in common:  # fields added to AgentSpec later: in the key only when set
            common["agent_spec"] = tuple({k: v for k, v in entry.items()
                                          if not (k in SPEC_ADDED_LATER and v == SPEC_ADDED_LATER[k])}
                                         for entry in common["agent_spec"])
        recipes = agent_configs(self.agent_spec, self.agents, self.recipe, self.hidden, self.activation)
        if any(c != for_env(c, self.env_id) for c in recipes):
            common["failure_reward"] = "none: a termination is not a failure here"  # runs before 2026-12-02 had −100
        return ResumeKey(common, {m: options_key(self.options_for(m)) for m in self.methods}, retired=("first_seed",))


NOT_IN_KEY = ("seeds", "first_seed", "methods", "threads")
"""Fields a run's tables do not depend on: which runs a folder holds (a run's seed is its own;
``first_seed`` left the key on 2026-12-06, so that a folder can gather seeds in passes) and how
they compute."""

SPEC_ADDED_LATER = {"algo": None, "sb3": (), "q_temperature": None, "q_student_temperature": None}
"""``AgentSpec`` fields added after results were saved, with their defaults (as ``ADDED_LATER``)."""

COMMON_FIELDS = frozenset(f.name for f in fields(RLConfig)) - {"options"}
NOT_FLAGS = ("methods", "options")
"""The fields that are no flag of their own: the commands name the methods, and the options are
the methods' own flags."""


def rl_config(methods: tuple[str, ...] | str, **values: Any) -> RLConfig:
    """An ``RLConfig`` from flat values: ``methods`` as names or one comma-separated text
    (``"frd,independent"``, as ``frd compare --methods`` takes them); common fields by name, and each option to every listed
    method that has it (an option no listed method has is an error naming its methods);
    ``agent_spec`` may be given as its text, e.g. ``"h=32;h=64,lr=3e-4"``; without a ``target``
    (or with None) the env's mission score (``default_target``: CartPole 490, Acrobot −100, …)."""
    methods = tuple(m.strip() for m in methods.split(",") if m.strip()) if isinstance(methods, str) else tuple(methods)
    for m in methods:
        get_method(m)
    common = {k: v for k, v in values.items() if k in COMMON_FIELDS}
    if common.get("target") is None:
        env_id = common.get("env_id", RLConfig.env_id)
        check_env_id(env_id).close()  # an unknown env is named as such, not as one without a mission
        common["target"] = default_target(env_id)
    if isinstance(common.get("agent_spec"), str):
        common["agent_spec"] = parse_agent_spec(common["agent_spec"])
    options = build_options(RL_METHODS, methods, {k: v for k, v in values.items() if k not in COMMON_FIELDS})
    return RLConfig(methods=methods, options=options, **common)


document_keywords(rl_config, RLConfig, RL_METHODS, NOT_FLAGS)
