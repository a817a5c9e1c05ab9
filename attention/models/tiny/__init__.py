"""A tiny attention-only transformer, trained live, so a learner watches a head find a pattern.

    x_0     = token[ids] + position[0..T-1]                        (T, d_model), no LayerNorm, no MLP
    per layer l (h heads of d_head = d_model / h), causal:
      queries, keys, values = x W_q, x W_k, x W_v                   (split into heads)
      weights = softmax(mask(queries keys^T / sqrt(d_head)))        context = weights @ values
      x_(l+1) = x_l + concat(context) W_O                            (the residual stream)
    logits  = x_L W_U                                               (T, vocab)

The attention is `attention.basics.core`'s own functions (project, scores, apply_mask, softmax, merge_heads), and a
snapshot's layer is a `Config` (`layer_config`) whose `attention.compute` is that layer on the probe sequence, so
the existing panels draw any step of the training. Training (`Trainer`, `train`) is AdamW on one torch thread,
seeded by the settings alone: the same `Settings` give the same snapshots, number for number, and a run is a pure
function of its settings (`server.training` keeps one run a setting for every visitor of the server).

Tasks, on a random run of tokens x (length L): induction (x then x again: predict the repeat), reverse (x, a
separator, x reversed), sort (x, a separator, x sorted), previous_token (predict the token before each one).
The run length is drawn anew each batch (4 to 16), or is fixed: then the model learns a positional shortcut
that fails at every other length (`evaluate_lengths`).

The parts: settings (`Settings`, declared once, and the tasks' constants), data (the tasks' sequences), model (the
weights and `forward`), optim (AdamW written out), trainer (`losses`, `measure`, `Trainer`, `advance`, `train`),
snapshots (a run as data, and when a head formed), analysis (a layer as a `Config`, other run lengths, a head
switched off). Every public name is re-exported here: callers write `tiny.NAME`.
"""

from .analysis import Ablation, LengthTest, ablate, evaluate_lengths, layer_config, layer_result
from .data import Sequences, labels, probe, sequences
from .model import Forward, LayerWeights, Weights, attention_layer, forward, init_weights
from .optim import AdamW
from .settings import (
    CHANCE,
    EVAL_BATCH,
    FIRST_LAYER,
    FORMED_SCORE,
    IGNORE,
    MAX_POSITIONS,
    MAX_RUN,
    MAX_RUN_BYTES,
    MAX_SNAPSHOTS,
    NAMES,
    PROBE_SEED,
    SCORE_NAMES,
    SEP,
    SETTINGS,
    TASKS,
    TRAIN_LENGTHS,
    VOCAB,
    Settings,
)
from .snapshots import Formation, Run, Snapshot, at_step, best_head, formation, formed
from .trainer import (
    Diverged,
    Measure,
    Trainer,
    advance,
    losses,
    measure,
    one_thread,
    previous_token_scores,
    task_scores,
    train,
    warm,
    worker_init,
    worker_ready,
)

__all__ = [
    "Ablation",
    "AdamW",
    "CHANCE",
    "Diverged",
    "EVAL_BATCH",
    "FIRST_LAYER",
    "FORMED_SCORE",
    "Formation",
    "Forward",
    "IGNORE",
    "LayerWeights",
    "LengthTest",
    "MAX_POSITIONS",
    "MAX_RUN",
    "MAX_RUN_BYTES",
    "MAX_SNAPSHOTS",
    "Measure",
    "NAMES",
    "PROBE_SEED",
    "Run",
    "SCORE_NAMES",
    "SEP",
    "SETTINGS",
    "Sequences",
    "Settings",
    "Snapshot",
    "TASKS",
    "TRAIN_LENGTHS",
    "Trainer",
    "VOCAB",
    "Weights",
    "ablate",
    "advance",
    "at_step",
    "attention_layer",
    "best_head",
    "evaluate_lengths",
    "formation",
    "formed",
    "forward",
    "init_weights",
    "labels",
    "layer_config",
    "layer_result",
    "losses",
    "measure",
    "one_thread",
    "previous_token_scores",
    "probe",
    "sequences",
    "task_scores",
    "train",
    "warm",
    "worker_init",
    "worker_ready",
]
