"""Every palette reads with the common colour vision deficiencies (issue 44, WCAG 1.4.1 and 1.4.11).

The colours are read from where they are drawn (assets/heatmap.js for the heatmaps, ui.charts for the Vega-Lite
charts) and seen through the simulation of Machado, Oliveira and Fernandes (2009), "A physiologically-based model for
simulation of color vision deficiency", IEEE TVCG 15(6), at severity 1.0 (protanopia, deuteranopia, tritanopia), in
linear RGB; differences are CIE76 ΔE in CIELAB (D65). A sequential scale must keep its order in lightness; a diverging
one must climb in lightness from each end to its middle and keep its two sides apart; categorical colours that meet on
a chart (neighbours in order, and the first four) must stay apart.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from ui import charts

ROOT = Path(__file__).resolve().parents[3]
HEATMAP_JS = (ROOT / "assets" / "heatmap.js").read_text(encoding="utf-8")

# Machado et al. (2009), Table 1 at severity 1.0: linear RGB to simulated linear RGB
MACHADO = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}
VISIONS = ["typical", *MACHADO]
SRGB_TO_XYZ = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
WHITE = np.array([0.95047, 1.0, 1.08883])


def rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def scheme(name: str) -> list[tuple[int, int, int]]:
    """A colour scheme's stops as heatmap.js declares them: `const NAME = "rrggbb..." + "..."`."""
    found = re.search(rf'const {name} =\s*((?:"[0-9a-f]+"\s*\+?\s*)+);', HEATMAP_JS)
    assert found, f"{name} not found in assets/heatmap.js"
    digits = "".join(re.findall(r'"([0-9a-f]+)"', found.group(1)))
    return [rgb(digits[k : k + 6]) for k in range(0, len(digits), 6)]


def constant(name: str) -> dict[str, tuple[int, int, int]]:
    """`const NAME = { on: [r, g, b], off: [...] }` or `const NAME = [r, g, b]` in heatmap.js."""
    found = re.search(rf"const {name} = (.+?);", HEATMAP_JS)
    assert found, f"{name} not found in assets/heatmap.js"
    return {key or "": tuple(map(int, values.split(","))) for key, values in
            re.findall(r"(?:(\w+): )?\[(\d+, \d+, \d+)\]", found.group(1))}  # fmt: skip


def linear(colour: tuple[int, int, int]) -> np.ndarray:
    c = np.asarray(colour, dtype=float) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def lab(colour: tuple[int, int, int], vision: str = "typical") -> np.ndarray:
    """CIELAB of the colour as a person with this vision sees it."""
    lin = linear(colour)
    if vision != "typical":
        lin = np.clip(np.asarray(MACHADO[vision]) @ lin, 0, 1)
    t = (SRGB_TO_XYZ @ lin) / WHITE
    f = np.where(t > 216 / 24389, np.cbrt(t), (24389 / 27 * t + 16) / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: tuple[int, int, int], b: tuple[int, int, int], vision: str) -> float:
    return float(np.linalg.norm(lab(a, vision) - lab(b, vision)))


def test_the_simulation_is_machados_a_grey_stays_grey_and_red_green_collapse_for_deuteranopia():
    # each row of a Machado matrix sums to 1: greys (and white) are seen as they are
    for vision in MACHADO:
        assert np.allclose(np.asarray(MACHADO[vision]).sum(axis=1), 1, atol=1e-3), vision
        assert delta_e((128, 128, 128), (128, 128, 128), vision) == 0
        assert np.allclose(lab((255, 255, 255), vision), [100, 0, 0], atol=0.5)
    # the test can fail: a red and a green of one lightness, far apart to typical vision, nearly meet
    red, green = (200, 80, 60), (110, 130, 40)
    assert delta_e(red, green, "typical") > 40
    assert delta_e(red, green, "deuteranopia") < delta_e(red, green, "typical") / 3


@pytest.mark.parametrize("vision", VISIONS)
def test_the_weights_scale_keeps_its_order_in_lightness_and_eight_levels_apart(vision):
    stops = scheme("VIRIDIS")
    lightness = [lab(c, vision)[0] for c in stops]
    assert all(b > a for a, b in zip(lightness, lightness[1:], strict=False)), lightness  # read low to high by L*
    assert lightness[-1] - lightness[0] > 60
    levels = [stops[round(k * (len(stops) - 1) / 7)] for k in range(8)]  # a reader tells eight levels apart
    assert min(delta_e(a, b, vision) for a, b in zip(levels, levels[1:], strict=False)) > 8


@pytest.mark.parametrize("vision", VISIONS)
def test_the_diverging_scale_climbs_to_its_middle_from_both_ends_and_keeps_its_sides_apart(vision):
    stops = scheme("BLUE_ORANGE")
    mid = len(stops) // 2
    lightness = [lab(c, vision)[0] for c in stops]
    assert all(b > a for a, b in zip(lightness[:mid], lightness[1 : mid + 1], strict=True)), lightness
    assert all(b < a for a, b in zip(lightness[mid:], lightness[mid + 1 :], strict=False)), lightness
    # a negative and a positive score of one size look different: mirror stops apart, the ends far apart
    mirrors = [delta_e(stops[k], stops[-1 - k], vision) for k in range(mid)]
    assert min(mirrors) > 20, mirrors
    assert delta_e(stops[0], stops[-1], vision) > 60


@pytest.mark.parametrize("vision", VISIONS)
def test_the_masks_two_colours_differ_in_lightness_for_every_vision(vision):
    mask = constant("MASK")
    assert set(mask) == {"on", "off"}
    assert delta_e(mask["on"], mask["off"], vision) > 30
    assert abs(lab(mask["on"], vision)[0] - lab(mask["off"], vision)[0]) > 25  # apart in lightness, not hue alone


def test_blocked_cells_are_hatched_not_told_by_their_grey_alone():
    # the blocked grey sits near the diverging scale's pale middle, so a blocked cell is marked by a stroke too
    blocked = constant("BLOCKED")[""]
    middle = scheme("BLUE_ORANGE")[len(scheme("BLUE_ORANGE")) // 2]
    assert delta_e(blocked, middle, "typical") < 25  # why colour alone would not do
    assert "hatchBlocked(ctx, state, L);" in HEATMAP_JS
    assert re.search(r"function isOff\(h, values, blocked, k\)", HEATMAP_JS)


@pytest.mark.parametrize("vision", VISIONS)
def test_the_charts_categorical_colours_keep_neighbours_and_the_first_four_apart(vision):
    colours = [rgb(c) for c in charts.PALETTE]
    assert len(set(colours)) == len(colours)
    pairs = list(zip(colours, colours[1:], strict=False)) + list(itertools.combinations(colours[:4], 2))
    worst = min(delta_e(a, b, vision) for a, b in pairs)
    assert worst > 20, (vision, worst)
