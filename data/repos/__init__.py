"""Code repositories: git run without the machine's configuration, a repository's commits
ingested into the lake, the bundled samples rebuilt from their patches, JavaScript and
TypeScript read as syntax trees."""

from data.repos.git_cli import GitError, checkout, git
from data.repos.ingest import ingest_repo
from data.repos.javascript_syntax import FUNCTION_VALUES, javascript_tree
from data.repos.samples import LEDGERLINE, PARCELRATE, TABSHARE, SampleRepo, build_sample_repo

__all__ = [
    "FUNCTION_VALUES",
    "GitError",
    "LEDGERLINE",
    "PARCELRATE",
    "SampleRepo",
    "TABSHARE",
    "build_sample_repo",
    "checkout",
    "git",
    "ingest_repo",
    "javascript_tree",
]
