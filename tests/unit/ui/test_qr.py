"""ui/qr.py, our own QR encoder, read back by a real decoder (zbar's zbarimg, Debian's zbar-tools) at every version
it makes: what it encodes is what a phone's camera reads."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from ui import qr


def decoded(text: str, tmp_path: Path) -> bytes:
    zbarimg = shutil.which("zbarimg")
    if zbarimg is None:
        message = "no zbarimg to read the codes back: apt-get install zbar-tools"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    m = qr.matrix(text)
    quiet, px = 4, 4
    side = (len(m) + 2 * quiet) * px
    image = Image.new("L", (side, side), 255)
    for r, row in enumerate(m):
        for c, dark in enumerate(row):
            if dark:
                image.paste(0, ((c + quiet) * px, (r + quiet) * px, (c + quiet + 1) * px, (r + quiet + 1) * px))
    path = tmp_path / "code.png"
    image.save(path)
    out = subprocess.run([zbarimg, "-q", "--raw", "-Sbinary", str(path)], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.removesuffix(b"\n")


# The longest text of each version at level M in byte mode (versions 1 to 10), and one byte more (the next version)
LONGEST = {1: 14, 2: 26, 3: 42, 4: 62, 5: 84, 6: 106, 7: 122, 8: 152, 9: 180, 10: 213}


@pytest.mark.parametrize("version", LONGEST)
def test_the_longest_text_of_each_version_reads_back(version: int, tmp_path: Path) -> None:
    text = ("http://lab.example.org/poll?room=AB2CD&x=" * 6)[: LONGEST[version]]
    assert len(qr.matrix(text)) == 17 + 4 * version
    assert decoded(text, tmp_path) == text.encode()
    if version < 10:
        assert len(qr.matrix(text + "z")) == 17 + 4 * (version + 1)


def test_a_room_link_and_utf8_read_back(tmp_path: Path) -> None:
    for text in ("http://192.168.1.20:8501/poll?room=XY7Q2", "é" * 100 + "z" * 13):
        assert decoded(text, tmp_path) == text.encode()


def test_a_text_too_long_is_refused_and_the_svg_has_its_quiet_zone() -> None:
    with pytest.raises(ValueError, match="too long"):
        qr.matrix("x" * 214)
    image = qr.svg("http://localhost:8501/poll?room=ABCDE", module_px=5)
    side = 29 + 2 * 4  # version 3, and 4 modules of white each side
    assert f'viewBox="0 0 {side} {side}"' in image and f'width="{side * 5}"' in image
    assert "M4,4h1v1h-1z" in image  # the top-left finder's corner, inside the quiet zone
    assert 'role="img" aria-label="QR code of the link"' in image and "<title>QR code of the link</title>" in image
