"""Rendering of findings: ``text`` (rich), ``json``, ``sarif`` and ``github``.

Analysis returns :class:`~kvflowmap.check.model.Finding` objects; these
functions only turn them into strings, deterministically."""

from kvflowmap.report.github import render_github
from kvflowmap.report.json_out import render_json, summarize
from kvflowmap.report.sarif import render_sarif
from kvflowmap.report.text import render_text

__all__ = ["render_github", "render_json", "render_sarif", "render_text", "summarize"]
