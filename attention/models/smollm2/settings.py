"""The settings of the "Inside a chat model" page and of `--model smollm2` on the command line, declared once."""

from __future__ import annotations

from ...basics.params import Param

DEFAULT_PROMPT = "When Mary and John went to the store, John gave a drink to"

PAGE_TOKENS = 64  # the page and the command line read the first 64 tokens of a prompt (the benchmark length)
MAX_GENERATE = 64  # tokens generated one at a time (after at most PAGE_TOKENS of prompt: 128 in the cache)
ABLATIONS = ("none", "head", "layer")
# The settings of the "Inside a chat model" page and of `--model smollm2` on the command line, declared once (the
# page's URL keys are these names under the chat_ prefix; the flags are --layer, --head, --generate, ...)
SETTINGS: dict[str, Param] = {
    "prompt": Param("text", "Prompt", "The text the model reads; it predicts the token after it.",
                    default=DEFAULT_PROMPT),
    "layer": Param("int", "Layer", "Which of the 30 layers (0 to 29).", default=18, lo=0, hi=29),
    "head": Param("int", "Query head", "Which of the 9 query heads (0 to 8); heads 0-2 read K/V head 0, 3-5 K/V "
                  "head 1, 6-8 K/V head 2.", default=0, lo=0, hi=8),
    "behaviour": Param("choice", "Colour the head map by", "The behaviour score every head gets on this prompt.",
                       default="sink", choices=("sink", "previous_token", "induction", "self")),
    "temperature": Param("float", "Temperature", "Next-token probabilities are softmax(logits / temperature): "
                         "below 1 sharper, above 1 flatter; 0 always picks the most probable token.",
                         default=1.0, lo=0.0, hi=2.0),
    "top_k": Param("int", "Top-k", "Only the k most probable tokens may be drawn.", default=10, lo=1, hi=50),
    "generate": Param("int", "Tokens generated", "How many tokens have been generated one at a time after the "
                      "prompt, each reading the KV cache.", default=0, lo=0, hi=MAX_GENERATE),
    "ablate": Param("choice", "Switch off", "Zero the selected head's output (or all 9 heads of its layer) and run "
                    "the model again.", default="none", choices=ABLATIONS),
    "induction": Param("bool", "Induction preset", "Replace the prompt by a random run of 20 tokens said twice.",
                       default=False),
    "target": Param("int", "The next token", "Whose logit \"What each head writes\" splits: the model's k-th most "
                    "probable next token (0: the most probable).", default=0, lo=0, hi=9),
    "versus": Param("int", "Minus the logit of", "Split a difference of two logits, which heads prefer one token to "
                    "the other: the k-th most probable next token (0: none, 1: the most probable).", default=0, lo=0,
                    hi=10),
    "rope": Param("bool", "with RoPE", "Omega with the queries and keys turned by their positions (as the model "
                  "computes it), or without.", default=True),
}  # fmt: skip
