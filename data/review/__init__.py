"""Review of what a run made: the report page, the diagnosis of a small taskset, the diff
of two versions and the curation server people accept and reject tasks on."""

from data.review.curation_server import CurationServer
from data.review.diagnosis import diagnose, diagnose_latest
from data.review.report import render_report, write_report
from data.review.version_diff import diff_versions, format_diff

__all__ = [
    "CurationServer",
    "diagnose",
    "diagnose_latest",
    "diff_versions",
    "format_diff",
    "render_report",
    "write_report",
]
