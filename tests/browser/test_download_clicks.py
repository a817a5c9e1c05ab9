"""Downloads under load: while three other sessions rerun (each end of a run is when Streamlit cleans its media
store), every download click in Chromium gives its file, none "canceled". A small run of
benchmarks/download_clicks.py (100 clicks there)."""

from __future__ import annotations

from benchmarks import download_clicks


def test_twenty_download_clicks_while_three_sessions_rerun_all_give_their_file(browser, app_url) -> None:
    result = download_clicks.clicks(browser, app_url, 20, loaders=3)
    assert result["failures"] == []
    assert result["reruns_meanwhile"] >= 20  # the others really were rerunning throughout
