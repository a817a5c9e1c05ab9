"""The old name of `attention.models.minilm` (all-MiniLM-L6-v2): the same module object, so `attention.pretrained.X`
and `attention.models.minilm.X` are one thing (a test's monkeypatch or cache_clear reaches both).

New code imports `from attention.models import minilm`.
"""

import sys

from .models import minilm

sys.modules[__name__] = minilm
